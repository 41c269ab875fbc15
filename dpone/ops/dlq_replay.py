"""Seed 004's module path of the replay service; it lives in :mod:`dpone.ops.replay.service`."""

from __future__ import annotations

from dpone.ops.replay.service import DlqRecordResolver, DlqReplayService, DlqReplaySink

__all__ = ["DlqRecordResolver", "DlqReplayService", "DlqReplaySink"]
