"""Where things are in a dead-letter store, and how its documents are written (SPEC §5)::

    runs/<run_id>/segments/<name>.jsonl      create-only segments, one record per line
    runs/<run_id>/index.json                 dpone.dlq-index.v1, replaced atomically
    runs/<run_id>/writer.lock                held (flock) by the live writer, removed at the end
    acks/<run_id>/<replay_id>-<seq>.jsonl    create-only, one dpone.dlq-replay-ack.v1 per line

A run folder is built as ``runs/.new-<run_id>-<token>`` and renamed into place.
"""

from __future__ import annotations

from typing import Any

import orjson

from dpone.contracts.dlq import MAX_INDEX_BYTES, MAX_SEGMENT_BYTES
from dpone.dlq.segments import SEGMENTS_DIR

RUNS_DIR = "runs"
ACKS_DIR = "acks"
INDEX_FILE = "index.json"
LOCK_FILE = "writer.lock"
NEW_RUN_PREFIX = ".new-"
# Reads are bounded by the hard maxima, whatever the policy of the writer was.
HARD_MAX_SEGMENT_BYTES = MAX_SEGMENT_BYTES[2]
HARD_MAX_INDEX_BYTES = MAX_INDEX_BYTES[2]


def dumps(doc: Any) -> bytes:
    """How documents are written: compact JSON with sorted keys and a final newline."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def run_where(run_id: str) -> str:
    return f"{RUNS_DIR}/{run_id}"


def index_where(run_id: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"


def segment_where(run_id: str, name: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}/{name}"


__all__ = [
    "ACKS_DIR",
    "HARD_MAX_INDEX_BYTES",
    "HARD_MAX_SEGMENT_BYTES",
    "INDEX_FILE",
    "LOCK_FILE",
    "NEW_RUN_PREFIX",
    "RUNS_DIR",
    "dumps",
    "index_where",
    "run_where",
    "segment_where",
]
