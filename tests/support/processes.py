"""dpone as a process of its own: ``python -m dpone ...``, killed where a test says, and what
it printed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CliRun:
    """What one CLI invocation printed, and its exit code."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed


def dpone_subprocess(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    fault: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python -m dpone ARGS`` as a process of its own, with no inherited ``DPONE_*``
    variable but ``env``; SIGKILLed by itself at the lifecycle point ``fault`` (dpone.faults)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    full.update(env)
    if fault is not None:
        full["DPONE_FAULT_POINT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "dpone", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def dpone_killed_at(fault: str, args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> None:
    """:func:`dpone_subprocess` that must have died by its own SIGKILL at ``fault``."""
    proc = dpone_subprocess(args, cwd=cwd, env=env, fault=fault)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def listening(port: int) -> Callable[[], bool]:
    """Whether something accepts connections on 127.0.0.1:``port`` (for :func:`wait_until`)."""

    def check() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    return check


def wait_until(
    ready: Callable[[], bool],
    what: str,
    *,
    process: subprocess.Popen[bytes] | None = None,
    timeout: float = 60.0,
) -> None:
    """Poll ``ready`` until it holds: a server's start-up, never a measure of speed. Fails
    naming ``what`` once ``process`` (the one that should make it true) has exited, or after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(0.1)


__all__ = [
    "CliRun",
    "dpone_killed_at",
    "dpone_subprocess",
    "free_port",
    "listening",
    "wait_until",
]
