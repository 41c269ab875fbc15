"""dpone as a process of its own: ``python -m dpone ...``, killed where a test says, and what
it printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
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


__all__ = ["CliRun", "dpone_killed_at", "dpone_subprocess"]
