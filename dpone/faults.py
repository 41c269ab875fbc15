"""Named points of the lifecycle where the crash tests kill the process.

Production pays one global lookup per point: the hook is None unless the environment
variable ``DPONE_FAULT_POINT`` is set (``name`` or ``name:k`` for the k-th time the point is
reached), in which case the process kills itself with SIGKILL right there — no cleanup, no
atexit, exactly like a power cut or an OOM kill.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

POINTS: tuple[str, ...] = (
    "after_recover",
    "after_chunk_dlq",  # the k-th chunk's DLQ records are durable
    "during_dlq_group_commit",  # records written, not yet synced
    "after_chunk_staged",
    "after_dlq_close",
    "before_sink_commit",
    # Only the dlt sink passes it, inside its commit: the run's load package is normalized and
    # recorded (dlt load id <-> dpone load id), dlt has not started loading it.
    "dlt_before_load",
    "after_sink_commit",
    "after_evidence",
    "during_state_replace",
    "after_state",
    # Not on the path of `dpone run`: the replay executor (dpone/ops/replay/executor.py and
    # binding.py), around each batch load and its acknowledgements.
    "replay_before_batch_commit",  # the k-th batch is staged in the sink, not committed
    "replay_after_batch_commit",  # the k-th batch committed with its keys, not acknowledged
    "replay_during_acks",  # the k-th group of acknowledgements is durable, others are not
    # Not on the path of `dpone run`: retention's compaction (DlqStore.delete_records), after
    # the compacted segments are published and after the index that lists them is replaced.
    "retention_after_compact",
    "retention_after_index",
)

_hook: Callable[[str], None] | None = None


def checkpoint(name: str) -> None:
    if _hook is not None:
        _hook(name)


def _install_from_env() -> None:
    global _hook
    spec = os.environ.get("DPONE_FAULT_POINT")
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target not in POINTS:
        raise ValueError(f"unknown fault point {target!r}; known: {', '.join(POINTS)}")
    wanted = int(nth) if nth else 1
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == target:
            seen["n"] += 1
            if seen["n"] == wanted:
                os.kill(os.getpid(), signal.SIGKILL)

    _hook = hook


_install_from_env()
