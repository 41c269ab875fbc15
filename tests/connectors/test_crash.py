"""A process killed with SIGKILL before or inside commit: the next run's cleanup leaves the
target either fully with the load or fully without it, and a replay then lands exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .sinkkit import PIPELINE, Target, batch, spec

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path

    import dpone.connectors.sinks.filesystem as fs
    from tests.connectors.sinkkit import Target, batch, spec

    kind, base, url, config, point = sys.argv[1:6]
    target = Target(kind, Path(base), json.loads(config), url or None)

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    class Dying:
        '''Wraps a connection; dies on the marker INSERT (DuckDB) or on COMMIT (PostgreSQL).'''
        def __init__(self, inner):
            self._inner = inner
        def execute(self, sql, *args, **kwargs):
            if sql.startswith("INSERT INTO") and "_dpone_loads" in sql:
                die()
            return self._inner.execute(sql, *args, **kwargs)
        def commit(self):
            die()
        def __getattr__(self, name):
            return getattr(self._inner, name)

    sink = target.sink()
    if kind == "filesystem":
        sink.max_rows_per_file = 2
    load = sink.begin(spec("l2", "merge"))
    for lo in (3, 5, 7):
        load.write(batch([(lo, f"new{lo}", "1"), (lo + 1, f"new{lo + 1}", "2")]))
    if point == "before_commit":
        die()
    if point == "inside_commit" and kind == "duckdb":
        load._con = Dying(load._con)
    if point == "inside_commit" and kind == "postgres":
        load._conn = Dying(load._conn)
    if point == "before_marker":
        fs.create_json = die
    if point == "after_marker":
        calls = []
        real_replace = os.replace
        def replace(src, dst):
            calls.append(src)
            if len(calls) == 2:
                die()
            real_replace(src, dst)
        fs.os.replace = replace
    load.commit()
    if point == "after_commit":
        die()
    print("survived")
    """
)

WITHOUT = [(1, "a1"), (2, "a2"), (3, "a3"), (4, "a4")]
WITH = [
    (1, "a1"),
    (2, "a2"),
    (3, "new3"),
    (4, "new4"),
    (5, "new5"),
    (6, "new6"),
    (7, "new7"),
    (8, "new8"),
]

CASES = [
    ("duckdb", "before_commit", False),
    ("duckdb", "inside_commit", False),
    ("duckdb", "after_commit", True),
    ("postgres", "before_commit", False),
    ("postgres", "inside_commit", False),
    ("postgres", "after_commit", True),
    ("filesystem", "before_commit", False),
    ("filesystem", "before_marker", False),
    ("filesystem", "after_marker", True),
]


@pytest.mark.parametrize(
    ("target", "point", "landed"),
    [
        pytest.param(
            kind,
            point,
            landed,
            id=f"{kind}-{point}",
            marks=[pytest.mark.postgres] if kind == "postgres" else [],
        )
        for kind, point, landed in CASES
    ],
    indirect=["target"],
)
def test_killed_load_is_all_or_nothing(target: Target, point: str, landed: bool) -> None:
    sink = target.sink()
    first = sink.begin(spec("l1", "merge"))
    first.write(batch([(i, f"a{i}", "0") for i in range(1, 5)]))
    first.commit()

    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            target.kind,
            str(target.base),
            target.url or "",
            json.dumps(target.config),
            point,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    if point == "after_marker":  # the commit point passed, the moves did not finish
        lake = target.base / target.config["path"]
        assert (lake / "_dpone_loads" / "l2.json").is_file()
        assert (lake / "_dpone_staging" / "l2").is_dir()
        assert target.final_files() != sorted(p.name for p in target.sink().committed_files())  # type: ignore[attr-defined]

    after = target.sink()  # "the next run"
    removed = after.cleanup_abandoned(PIPELINE)
    names = [(r["id"], r["name"]) for r in target.rows() or []]
    assert target.leftovers() == []
    if landed:
        assert names == WITH
        assert after.committed_load("l2") is not None
        assert removed == []
    else:
        assert names == WITHOUT
        assert after.committed_load("l2") is None
        assert target.last_marker().load_id == "l1"  # type: ignore[union-attr]
        assert removed == ([] if target.kind == "postgres" else ["l2"])
    if target.kind == "filesystem":
        assert target.final_files() == sorted(p.name for p in after.committed_files())  # type: ignore[attr-defined]

    # The replay of the same load id lands exactly once whatever happened before.
    replay = after.begin(spec("l2", "merge"))
    for lo in (3, 5, 7):
        replay.write(batch([(lo, f"new{lo}", "1"), (lo + 1, f"new{lo + 1}", "2")]))
    replay.commit()
    assert [(r["id"], r["name"]) for r in target.rows() or []] == WITH
    assert target.leftovers() == []
