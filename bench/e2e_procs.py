"""Whole processes on equal terms for the end-to-end benchmark.

Every program the benchmark times, dpone's and the ones it is compared with, is started the
same way: forked from this process, opted out of transparent huge pages in the child before it
executes anything (``prctl(PR_SET_THP_DISABLE)`` by ctypes, which survives ``execv`` and is
inherited by the program's own children), pinned with ``taskset`` to the same cores, under GNU
time for its peak RSS, with its Python bytecode compiled beforehand into one
``PYTHONPYCACHEPREFIX`` folder (this machine sets ``PYTHONDONTWRITEBYTECODE=1``, which would
make every run compile dpone's sources again, about 0.4 s). Wall time, CPU time (user + sys,
from ``wait4``) and peak RSS are measured for each run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_PR_SET_THP_DISABLE = 41  # <linux/prctl.h>
_PR_GET_THP_DISABLE = 42
GNU_TIME = "/usr/bin/time"
NOT_A_DISK = ("tmpfs", "ramfs", "devtmpfs")


def thp_off() -> None:
    """In a forked child before ``execv``: no transparent huge pages for what it runs."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        os._exit(97)  # no silent fallback to unequal terms


def thp_disabled_in_children() -> bool:
    """Whether a child started like the benchmark's programs really runs with THP off."""
    probe = f"import ctypes; print(ctypes.CDLL(None).prctl({_PR_GET_THP_DISABLE}, 0, 0, 0, 0))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        preexec_fn=thp_off,  # the bench has no threads when it forks
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip() == "1"


def filesystem(path: Path) -> str:
    """The filesystem type ``path`` lives on (/proc/mounts: the longest mount point above it)."""
    best, kind = "", "unknown"
    resolved = path.resolve()
    with open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            _, point, fstype, *_ = line.split()
            point = point.replace("\\040", " ")
            if (resolved == Path(point) or Path(point) in resolved.parents) and len(point) > len(
                best
            ):
                best, kind = point, fstype
    return kind


def child_env(base: Path) -> dict[str, str]:
    """The environment of every timed program: bytecode cached in ``base/pycache``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    return env


def compile_bytecode(env: dict[str, str], *packages: Path) -> None:
    """Compile ``packages`` into the children's bytecode folder (what ``pip install`` does for
    an installed package), in a child that has their environment."""
    code = (
        "import compileall, sys\n"
        "sys.exit(not all([compileall.compile_dir(p, quiet=1) for p in sys.argv[1:]]))"
    )
    subprocess.run([sys.executable, "-c", code, *map(str, packages)], env=env, check=True)


@dataclass(frozen=True)
class Timed:
    seconds: float  # wall
    cpu: float  # user + sys
    rss_mb: float  # peak resident set; 0 without GNU time
    spawned: float  # epoch seconds at the start


@dataclass
class Pinned:
    """Runs programs as whole processes on ``cores`` (``taskset -c``), in ``base``."""

    cores: str
    base: Path
    env: dict[str, str]

    def run(self, argv: list[str], tag: str) -> Timed:
        """Run ``argv``; stdout and stderr go to ``<tag>.out`` / ``<tag>.err`` in ``base``.

        The peak RSS is the program's own as GNU time (forked, then the program from it)
        reports it: this process's ``wait4`` would report at least the bench's own peak,
        which Linux carries across the spawned child's exec."""
        os.sync()  # what the bench left dirty (the CSV, removed runs) is not this run's bill
        rss_file = self.base / f"{tag}.rss"
        measure = (
            [GNU_TIME, "-f", "%M", "-o", str(rss_file)] if os.access(GNU_TIME, os.X_OK) else []
        )
        with (
            (self.base / f"{tag}.out").open("wb") as out,
            (self.base / f"{tag}.err").open("wb") as err,
        ):
            spawned = time.time()
            began = time.perf_counter()
            proc = subprocess.Popen(
                ["taskset", "-c", self.cores, *measure, *argv],
                stdout=out,
                stderr=err,
                cwd=self.base,
                env=self.env,
                preexec_fn=thp_off,  # the bench has no threads when it forks
            )
            _, status, usage = os.wait4(proc.pid, 0)
            took = time.perf_counter() - began
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            _, text = self.output(tag)
            raise RuntimeError(f"{tag}: {argv[1:3]} exited {code}: {text[-2000:]}")
        rss_mb = 0.0
        if measure:
            with contextlib.suppress(OSError, ValueError, IndexError):
                rss_mb = int(rss_file.read_text(encoding="utf-8").split()[-1]) / 1024
        return Timed(took, usage.ru_utime + usage.ru_stime, rss_mb, spawned)

    def output(self, tag: str) -> tuple[str, str]:
        return (
            (self.base / f"{tag}.out").read_text(encoding="utf-8"),
            (self.base / f"{tag}.err").read_text(encoding="utf-8", errors="replace"),
        )
