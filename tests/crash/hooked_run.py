"""``dpone`` with a test hook at one fault point (test-only; never imported by dpone).

    python hooked_run.py pause POINT[:k] DIR -- run MANIFEST ...
        At the k-th pass of POINT, create DIR/ready and wait until DIR/go exists: the caller
        holds the run there (lock held, stream started) and lets it go when it is done.

    python hooked_run.py pg_terminate POINT[:k] ADMIN_URL APP -- run MANIFEST ...
        At the k-th pass of POINT, terminate every PostgreSQL backend whose application_name
        is APP (the run's sink connection) from a connection of its own, wait until they are
        gone, and let the run go on: "the server dropped us" at exactly that point.

    python hooked_run.py dlt_kill WHERE TABLE -- run MANIFEST ...
        SIGKILL the run inside dlt's loader, where no dpone fault point can be (the dlt sink):
        ``job_committed``: the destination committed the job that loads TABLE, dlt has not
        recorded it (dlt reruns such a job); ``job_recorded``: right after dlt recorded it;
        ``before_dlt_loads``: every job is done, ``_dlt_loads`` not written yet.

Everything after ``--`` is the ``dpone`` command line. The hook is ``dpone.faults._hook``, the
same seam ``DPONE_FAULT_POINT`` uses to SIGKILL a run (``dlt_kill`` patches dlt instead).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2

import dpone.faults
from dpone.cli.main import main

DEADLINE_S = 300.0


def at_point(spec: str, action: Callable[[], None]) -> Callable[[str], None]:
    target, _, nth = spec.partition(":")
    if target not in dpone.faults.POINTS:
        raise SystemExit(f"unknown fault point {target!r}")
    wanted = int(nth) if nth else 1
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == target:
            seen["n"] += 1
            if seen["n"] == wanted:
                action()

    return hook


def pause(folder: Path) -> Callable[[], None]:
    def action() -> None:
        (folder / "ready").touch()
        deadline = time.monotonic() + DEADLINE_S
        while not (folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    return action


def pg_terminate(admin_url: str, application_name: str) -> Callable[[], None]:
    def action() -> None:
        conn = psycopg2.connect(admin_url)
        try:
            conn.autocommit = True
            cur = conn.cursor()
            cur.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (application_name,),
            )
            terminated = len(cur.fetchall())
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    (application_name,),
                )
                row = cur.fetchone()
                if row is None or row[0] == 0:
                    break
                time.sleep(0.01)
        finally:
            conn.close()
        print(f"hooked_run: terminated {terminated} backend(s)", file=sys.stderr)

    return action


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def dlt_kill(where: str, table: str) -> None:
    """Patch dlt (imported here, as the dlt sink would) to die at ``where``."""
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    from dlt.common.storages.load_package import PackageStorage, ParsedLoadJobFileName
    from dlt.load.load import Load

    if where == "before_dlt_loads":
        complete_package = Load.complete_package

        def dying_complete(self: Any, load_id: str, schema: Any, aborted: bool = False) -> None:
            if not aborted:
                kill()
            complete_package(self, load_id, schema, aborted)

        Load.complete_package = dying_complete  # type: ignore[method-assign]
        return
    if where not in ("job_committed", "job_recorded"):
        raise SystemExit(f"unknown dlt kill point {where!r}")
    save = PackageStorage.save_pending_transition

    def dying_save(self: Any, load_id: str, file_name: str, *args: Any) -> Any:
        ours = ParsedLoadJobFileName.parse(file_name).table_name == table
        if ours and where == "job_committed":
            kill()
        done = save(self, load_id, file_name, *args)
        if ours:
            kill()
        return done

    PackageStorage.save_pending_transition = dying_save  # type: ignore[method-assign, assignment]


def install(argv: list[str]) -> list[str]:
    """Install the hook described before ``--``; return the dpone arguments after it."""
    split = argv.index("--")
    mine, rest = argv[:split], argv[split + 1 :]
    kind, point, *args = mine
    if kind == "pause":
        dpone.faults._hook = at_point(point, pause(Path(args[0])))
    elif kind == "pg_terminate":
        dpone.faults._hook = at_point(point, pg_terminate(args[0], args[1]))
    elif kind == "dlt_kill":
        dlt_kill(point, args[0])
    else:
        raise SystemExit(f"unknown hook {kind!r}")
    return rest


if __name__ == "__main__":
    sys.argv = ["dpone", *install(sys.argv[1:])]
    main()
