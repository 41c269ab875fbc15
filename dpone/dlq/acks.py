"""Replay acknowledgements (SPEC §8): the ``dpone.dlq-replay-ack.v1`` document and the ack
segments that hold them, written and read.

An acknowledgement is written after the replay sink succeeded and never changes: a retry
that finds a matching acknowledgement skips the record. It pins the record it acknowledges by
checksum, the plan, the idempotency key and both identities.

``acks/<run_id>/<replay_id>-<seq>.jsonl`` is create-only and holds one acknowledgement per
line; a replay writes one segment per batch, after its sink committed. Every read verifies
each line's checksum. Deleting acknowledgements is :mod:`dpone.dlq.compaction`'s (it rewrites
a segment as ``<replay_id>.k<hash>-<seq>.jsonl``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any, Literal, get_args

from dpone.canonical import CHECKSUM_PATTERN, checksum
from dpone.clock import format_timestamp
from dpone.dlq import fsio, segments
from dpone.dlq.acklines import sealed_ack_columns
from dpone.dlq.errors import (
    DlqAckChecksumMismatch,
    DlqAckConflict,
    DlqAckInvalid,
    DlqAckMismatch,
    DlqIndexDrift,
    DlqRecordNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import DlqIndex
from dpone.dlq.layout import ACKS_DIR, dumps
from dpone.dlq.model import TIMESTAMP_PATTERN
from dpone.dlq.rundir import RunDir
from dpone.ids import is_identifier, is_ulid
from dpone.records import frozen

ACK_SCHEMA = "dpone.dlq-replay-ack.v1"
AckOutcome = Literal["applied", "still_rejected"]
ACK_OUTCOMES: tuple[str, ...] = get_args(AckOutcome)
KEY_PATTERN = r"^[A-Za-z0-9._:+/=-]{1,256}$"
IDENTITY_MAX = 512

ACK_KEYS = frozenset(
    {
        "schema",
        "run_id",
        "record_id",
        "record_sha256",
        "plan_id",
        "idempotency_key",
        "outcome",
        "resolver_identity",
        "target_identity",
        "acknowledged_at",
        "sha256",
    }
)

_KEY = re.compile(KEY_PATTERN)
_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)


@frozen
class ReplayAck:
    """One acknowledged replay of one record. ``sha256`` is filled in by :meth:`sealed`."""

    run_id: str
    record_id: str
    record_sha256: str
    plan_id: str
    idempotency_key: str
    outcome: AckOutcome
    resolver_identity: str
    target_identity: str
    acknowledged_at: str
    sha256: str = ""

    def body(self) -> dict[str, Any]:
        """The document without its checksum member."""
        return {
            "schema": ACK_SCHEMA,
            "run_id": self.run_id,
            "record_id": self.record_id,
            "record_sha256": self.record_sha256,
            "plan_id": self.plan_id,
            "idempotency_key": self.idempotency_key,
            "outcome": self.outcome,
            "resolver_identity": self.resolver_identity,
            "target_identity": self.target_identity,
            "acknowledged_at": self.acknowledged_at,
        }

    def sealed(self) -> ReplayAck:
        """This acknowledgement with its checksum computed."""
        return replace(self, sha256=checksum(self.body()))

    def to_json(self) -> dict[str, Any]:
        doc = self.body()
        doc["sha256"] = self.sha256 or checksum(doc)
        return doc

    @classmethod
    def from_json(cls, doc: Any, *, require_checksum: bool = True) -> ReplayAck:  # noqa: C901 (a flat check per field of an untrusted document)
        """Check ``doc`` against the acknowledgement contract (not its checksum)."""
        if not isinstance(doc, Mapping):
            raise _invalid("/")
        keys = set(doc)
        if not require_checksum:
            keys.add("sha256")
        if keys != ACK_KEYS or doc["schema"] != ACK_SCHEMA:
            raise _invalid("/")
        if type(doc["run_id"]) is not str or not _identifier_ok(doc["run_id"]):
            raise _invalid("/run_id")
        if not is_ulid(doc["record_id"]):
            raise _invalid("/record_id")
        for key in ("record_sha256", *(("sha256",) if "sha256" in doc else ())):
            if type(doc[key]) is not str or not _CHECKSUM.match(doc[key]):
                raise _invalid(f"/{key}")
        if type(doc["plan_id"]) is not str or not _key_ok(doc["plan_id"]):
            raise _invalid("/plan_id")
        if type(doc["idempotency_key"]) is not str or not _KEY.match(doc["idempotency_key"]):
            raise _invalid("/idempotency_key")
        if doc["outcome"] not in ACK_OUTCOMES:
            raise _invalid("/outcome")
        for key in ("resolver_identity", "target_identity"):
            value = doc[key]
            if type(value) is not str or not 0 < len(value) <= IDENTITY_MAX:
                raise _invalid(f"/{key}")
        if type(doc["acknowledged_at"]) is not str or not _TIMESTAMP.match(doc["acknowledged_at"]):
            raise _invalid("/acknowledged_at")
        return cls(
            run_id=doc["run_id"],
            record_id=doc["record_id"],
            record_sha256=doc["record_sha256"],
            plan_id=doc["plan_id"],
            idempotency_key=doc["idempotency_key"],
            outcome=doc["outcome"],
            resolver_identity=doc["resolver_identity"],
            target_identity=doc["target_identity"],
            acknowledged_at=doc["acknowledged_at"],
            sha256=doc.get("sha256", ""),
        )


# The run, the plan and the identities repeat on every line of a replay's acknowledgements:
# their checks are cached (the other fields differ per line).
@lru_cache(maxsize=256)
def _identifier_ok(value: str) -> bool:
    return is_identifier(value)


@lru_cache(maxsize=256)
def _key_ok(value: str) -> bool:
    return _KEY.match(value) is not None


def _invalid(pointer: str) -> DlqAckInvalid:
    return DlqAckInvalid(
        f"the acknowledgement is not a valid dpone.dlq-replay-ack.v1 document at {pointer}"
    )


# <replay_id>-<seq>.jsonl; a compacted one is <replay_id>.k<hash>-<seq>.jsonl.
ACK_FILE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})-([0-9]{6})\.jsonl")
MAX_ACK_SEGMENT_BYTES = 1 << 30
_ACK_PUBLISH_TRIES = 1000


def parse_ack_line(line: bytes, run_id: str, at: str) -> ReplayAck:
    ack = ReplayAck.from_json(segments.sealed_document(line, at, DlqAckChecksumMismatch))
    if ack.run_id != run_id:
        raise DlqAckChecksumMismatch(f"{at} acknowledges a record of another run")
    return ack


def parse_ack_segment(data: bytes, run_id: str, where: str) -> list[ReplayAck]:
    """Every acknowledgement of one ack segment, verified (the first bad line raises)."""
    lines = data.split(b"\n")
    if lines.pop():
        raise DlqAckChecksumMismatch(f"{where} line {len(lines) + 1} is truncated")
    if not lines:
        raise DlqAckChecksumMismatch(f"{where} does not verify: it is empty")
    return [parse_ack_line(line, run_id, f"{where} line {n}") for n, line in enumerate(lines, 1)]


def same_ack(a: ReplayAck, b: ReplayAck) -> bool:
    """Two acknowledgements of one replay of one record (only the time may differ)."""
    return (a.record_sha256, a.plan_id, a.idempotency_key, a.outcome) == (
        b.record_sha256,
        b.plan_id,
        b.idempotency_key,
        b.outcome,
    )


def replay_id_of(plan_id: str) -> str:
    """The file-name part of a replay: the hex of its plan id, shortened."""
    return re.sub(r"[^A-Za-z0-9_-]", "", plan_id.removeprefix("sha256:"))[:32] or "replay"


def write_ack(
    runs: RunDir,
    run_id: str,
    record_id: str,
    ack: ReplayAck | Mapping[str, Any],
    *,
    index: DlqIndex | None = None,
) -> ReplayAck:
    """Acknowledge the replay of one record (see :func:`write_acks`)."""
    fields = ack.body() if isinstance(ack, ReplayAck) else {**ack, "record_id": record_id}
    if fields.get("record_id") != record_id:
        raise DlqAckMismatch("the acknowledgement names another record")
    plan_id = str(fields.get("plan_id", ""))
    return write_acks(runs, run_id, replay_id_of(plan_id), [fields], index=index)[0]


def write_acks(
    runs: RunDir,
    run_id: str,
    replay_id: str,
    acks: Collection[ReplayAck | Mapping[str, Any]],
    *,
    index: DlqIndex | None = None,
) -> list[ReplayAck]:
    """Acknowledge a batch of replayed records of one closed run, as one ack segment.

    Each ack is a :class:`ReplayAck` or its fields (``schema``, ``run_id``,
    ``acknowledged_at`` and ``sha256`` may be left out and are filled in; ``record_id`` is
    required). Each must name a record the run's index lists, with its checksum. A record
    acknowledged already by the same replay (same plan, key and outcome) is a no-op that
    returns the existing acknowledgement; any other acknowledgement of it is
    ``DPONE_DLQ_ACK_CONFLICT``. ``index`` is the run's verified index when the caller
    has it. The new acknowledgements are durable when this returns.
    """
    check_identifier(run_id, "run id")
    check_identifier(replay_id, "replay id")
    if index is None or index.run_id != run_id:
        index = runs.read_index(run_id)
    if index.status != "closed":
        raise DlqRunNotOpen(f"run {run_id} is {index.status}; only closed runs are replayed")
    checksums = index.checksums()
    sealed_all = [_seal_ack(runs, run_id, ack) for ack in acks]
    # Every ack segment is verified (bytes, per line); whole acknowledgements are built
    # only when this batch names a record acknowledged before (a replay resumed).
    acked = ack_checksums(runs, run_id)
    existing = read_acks(runs, run_id) if any(a.record_id in acked for a in sealed_all) else {}
    out: list[ReplayAck] = []
    fresh: dict[str, ReplayAck] = {}
    for sealed in sealed_all:
        listed = checksums.get(sealed.record_id)
        if listed is None:
            raise DlqIndexDrift(f"run {run_id} lists no record {sealed.record_id}")
        if sealed.record_sha256 != listed:
            raise DlqAckMismatch(
                f"the acknowledgement of record {sealed.record_id} names another checksum"
            )
        prior = existing.get(sealed.record_id) or fresh.get(sealed.record_id)
        if prior is not None:
            if not same_ack(prior, sealed):
                raise DlqAckConflict(
                    f"record {sealed.record_id} of run {run_id} is acknowledged already "
                    "by another replay"
                )
            out.append(prior)
            continue
        fresh[sealed.record_id] = sealed
        out.append(sealed)
    if fresh:
        data = segments.encode([dumps(a.to_json()) for a in fresh.values()])
        _publish_acks(runs, run_id, replay_id, data)
    return out


def _publish_acks(runs: RunDir, run_id: str, replay_id: str, data: bytes) -> str:
    folder = f"{ACKS_DIR}/{run_id}"
    with runs.open_path(ACKS_DIR, run_id, create=True) as fd:
        taken = [
            int(m[2])
            for e in fsio.entries(fd, folder)
            if (m := ACK_FILE.fullmatch(e.name)) and m[1] == replay_id
        ]
        seq = max(taken, default=0) + 1
        for _ in range(_ACK_PUBLISH_TRIES):
            name = f"{replay_id}-{seq:06d}.jsonl"
            if segments.publish(fd, name, data, f"{folder}/{name}"):
                return name
            seq += 1  # another replay process took this name first
    raise DlqAckConflict(f"{folder} has no free acknowledgement segment name left")


def _seal_ack(runs: RunDir, run_id: str, ack: ReplayAck | Mapping[str, Any]) -> ReplayAck:
    if isinstance(ack, ReplayAck):
        doc = ack.body()
    else:
        doc = dict(ack)
        doc.pop("sha256", None)
        doc.setdefault("schema", ACK_SCHEMA)
        doc.setdefault("acknowledged_at", format_timestamp(runs.now()))
    if doc.setdefault("run_id", run_id) != run_id:
        raise DlqAckMismatch("the acknowledgement names another run")
    check_identifier(doc.get("record_id"), "record id")
    return ReplayAck.from_json(doc, require_checksum=False).sealed()


def read_ack(runs: RunDir, run_id: str, record_id: str) -> ReplayAck:
    check_identifier(record_id, "record id")
    ack = read_acks(runs, run_id).get(record_id)
    if ack is None:
        raise DlqRecordNotFound(f"record {record_id} of run {run_id} is not acknowledged")
    return ack


def read_acks(runs: RunDir, run_id: str) -> dict[str, ReplayAck]:
    """Every acknowledgement of a run, verified, by record id (empty when there is none).

    Files that are not named like an ack segment are left to ``verify`` (a stray file); a
    symlink is a path escape and an acknowledgement that does not verify raises. The same
    acknowledgement in two segments (an interrupted compaction) counts once; two
    different ones of one record are ``DPONE_DLQ_ACK_CONFLICT``.
    """
    check_identifier(run_id, "run id")
    acks: dict[str, ReplayAck] = {}
    for _, _, found in ack_segments(runs, run_id):
        for ack in found:
            prior = acks.get(ack.record_id)
            if prior is not None and not same_ack(prior, ack):
                raise DlqAckConflict(
                    f"record {ack.record_id} of run {run_id} has two different acknowledgements"
                )
            acks.setdefault(ack.record_id, ack)
    return acks


def ack_checksums(runs: RunDir, run_id: str) -> dict[str, str]:
    """record id -> the sha256 of its acknowledgement, every line verified (what
    retention needs of the acknowledgements: which records, and which acks).

    Lines in the form dpone writes are checked on their bytes (one SHA-256 each, see
    :func:`sealed_ack_columns`); anything else, or the same record acknowledged twice,
    goes through :func:`read_acks`, which parses and judges every acknowledgement.
    """
    check_identifier(run_id, "run id")
    out: dict[str, str] = {}
    for _, _, data in _ack_files(runs, run_id):
        columns = _ack_lines(runs, run_id, data)
        if columns is None:
            return {rid: a.sha256 for rid, a in read_acks(runs, run_id).items()}
        ids, shas = columns
        fresh = dict(zip(ids, shas, strict=True))
        if len(fresh) == len(ids) and fresh.keys().isdisjoint(out):
            out.update(fresh)
            continue
        for rid, sha in zip(ids, shas, strict=True):
            if out.setdefault(rid, sha) != sha:
                return {rid: a.sha256 for rid, a in read_acks(runs, run_id).items()}
    return out


def _ack_lines(runs: RunDir, run_id: str, data: bytes) -> tuple[list[str], list[str]] | None:
    """The record ids and ack checksums of an ack segment in the form dpone writes, every
    line's bytes verified (:func:`sealed_ack_columns`); ``None`` when a line needs the
    full check. Remembered by the segment's bytes (their SHA-256), so retention's plan,
    check and sweep verify each segment once."""
    key = (run_id, hashlib.sha256(data).digest())
    cached = runs.ack_cache.get(key)
    if cached is not None:
        return cached
    found = sealed_ack_columns(data, run_id)
    if found is not None:
        runs.ack_cache[key] = found
    return found


def ack_segments(runs: RunDir, run_id: str) -> list[tuple[str, bytes, list[ReplayAck]]]:
    """Every ack segment of a run as ``(name, bytes, acks)``, verified, in name order."""
    return [
        (name, data, parse_ack_segment(data, run_id, where))
        for name, where, data in _ack_files(runs, run_id)
    ]


def ack_segment_ids(runs: RunDir, run_id: str) -> list[tuple[str, bytes, list[str]]]:
    """Every ack segment as ``(name, bytes, record id per line)``: each line's checksum
    verified, without building the acknowledgements (what retention needs)."""
    out = []
    for name, where, data in _ack_files(runs, run_id):
        fast = _ack_lines(runs, run_id, data)
        if fast is not None:
            out.append((name, data, fast[0]))
            continue
        lines = data.split(b"\n")
        if lines.pop():
            raise DlqAckChecksumMismatch(f"{where} line {len(lines) + 1} is truncated")
        ids = []
        for number, line in enumerate(lines, start=1):
            at = f"{where} line {number}"
            doc = segments.sealed_document(line, at, DlqAckChecksumMismatch)
            if doc.get("run_id") != run_id or not is_ulid(doc.get("record_id")):
                raise DlqAckChecksumMismatch(f"{at} acknowledges a record of another run")
            ids.append(doc["record_id"])
        out.append((name, data, ids))
    return out


def _ack_files(runs: RunDir, run_id: str) -> list[tuple[str, str, bytes]]:
    """``(name, where, bytes)`` of every ack segment of a run, in name order."""
    folder = f"{ACKS_DIR}/{run_id}"
    if not (runs.root / ACKS_DIR / run_id).exists():
        return []
    out = []
    with runs.open_path(ACKS_DIR, run_id) as fd:
        for item in sorted(fsio.entries(fd, folder), key=lambda e: e.name):
            where = f"{folder}/{item.name}"
            if item.is_symlink() or not item.is_file(follow_symlinks=False):
                raise fsio.escape(where)
            if ACK_FILE.fullmatch(item.name) is None:
                continue
            data = fsio.read_file(fd, item.name, where, MAX_ACK_SEGMENT_BYTES) or b""
            out.append((item.name, where, data))
    return out


__all__ = [
    "ACK_FILE",
    "ACK_OUTCOMES",
    "ACK_SCHEMA",
    "MAX_ACK_SEGMENT_BYTES",
    "AckOutcome",
    "ReplayAck",
    "ack_checksums",
    "ack_segment_ids",
    "ack_segments",
    "parse_ack_line",
    "parse_ack_segment",
    "read_ack",
    "read_acks",
    "replay_id_of",
    "same_ack",
    "write_ack",
    "write_acks",
]
