"""The run writer lock excludes a second process, even while the holder removes it.

``release_lock`` removes ``writer.lock`` and then lets go of it. A process that opened the
old file just before sees the name gone once it gets the lock (``take_lock`` compares the
inode it locked with the one the name points to) and backs off, so two processes never
believe they hold the same run at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROUNDS = 1000

CONTENDER = r"""
import os, sys
from dpone.dlq.lock import release_lock, take_lock

run_dir, rounds = sys.argv[1], int(sys.argv[2])
run_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
held = clashes = 0
while held < rounds:
    lock_fd = take_lock(run_fd, "runs/run-1", create=True)
    if lock_fd is None:
        continue
    try:
        # Inside the lock: a create-only token no other holder may have at the same time.
        token = os.open("inside", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=run_fd)
    except FileExistsError:
        clashes += 1
    else:
        os.close(token)
        os.unlink("inside", dir_fd=run_fd)
    held += 1
    release_lock(run_fd, lock_fd)
print(clashes)
"""


def test_two_processes_never_hold_the_writer_lock_together(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, str(run_dir), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "0", "two processes held the run's lock at the same time"
    assert not (run_dir / "inside").exists()
