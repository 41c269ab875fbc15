"""Segment files: how the dead-letter store keeps many records in one file (SPEC §5).

A segment is a create-only JSON-lines file, one sealed ``dpone.dlq.v1`` record per line, in
record-id order. It is written whole to a temporary name, fsynced, published under its final
name with ``link(2)`` (which fails when the name exists: create-only without a window where a
half-written file carries the final name), and the folder is fsynced. A crash leaves either
nothing, or a temporary file (``.<name>.tmp-*``, removed by recovery), or the whole segment.

Why segments and not one file per record: creating a file costs a journal update per inode;
on the reference VM 10,000 new files took 1 to 5.8 s, more than loading a million rows.
A segment per chunk makes a reject cost bytes, and one fsync covers a whole chunk.

The run index lists each segment with the SHA-256 of its bytes, its record count, its first
and last record id and the latest ``expires_at`` of its records (:class:`SegmentEntry`).
Reading verifies the bytes against the index, then every line's own checksum; a problem is
reported with the segment's name and the line number, never with a value.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from dpone import durable
from dpone.canonical import CHECKSUM_PATTERN, verify_sealed
from dpone.dlq import fsio
from dpone.dlq.errors import (
    DlqChecksumMismatch,
    DlqError,
    DlqIndexDrift,
    DlqIndexInvalid,
    DlqRecordInvalid,
)
from dpone.dlq.model import TIMESTAMP_PATTERN, DlqRecord
from dpone.faults import checkpoint
from dpone.ids import is_ulid
from dpone.records import frozen

SEGMENTS_DIR = "segments"
SEGMENT_SUFFIX = ".jsonl"
# <seq>.jsonl from the local writer, p<partition>-c<chunk>.jsonl from a scale-out task,
# <name>-k<hash>.jsonl for a segment compacted by retention.
SEGMENT_FILE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_-]{0,95})\.jsonl")
SEGMENT_ENTRY_KEYS = frozenset(
    {"name", "sha256", "record_count", "first_record_id", "last_record_id", "expires_at"}
)
_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_COMPACTED = re.compile(r"-k[0-9a-f]{12}$")


def segment_name(seq: int, prefix: str = "") -> str:
    """The name of the ``seq``-th segment a writer publishes (``prefix`` for a partition)."""
    return f"{prefix}{seq:08d}{SEGMENT_SUFFIX}"


def compacted_name(name: str, data: bytes) -> str:
    """The name of ``name``'s compacted successor holding ``data``: derived from both, so an
    interrupted compaction that runs again publishes the very same file (a no-op)."""
    stem = _COMPACTED.sub("", name[: -len(SEGMENT_SUFFIX)])
    return f"{stem}-k{hashlib.sha256(data).hexdigest()[:12]}{SEGMENT_SUFFIX}"


def bytes_checksum(data: bytes | memoryview) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@frozen
class SegmentEntry:
    """One segment as the run index lists it."""

    name: str
    sha256: str
    record_count: int
    first_record_id: str
    last_record_id: str
    expires_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "record_count": self.record_count,
            "first_record_id": self.first_record_id,
            "last_record_id": self.last_record_id,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_json(cls, doc: Any, position: int) -> SegmentEntry:
        pointer = f"/segments/{position}"
        if not isinstance(doc, dict) or set(doc) != SEGMENT_ENTRY_KEYS:
            raise _invalid(pointer)
        if type(doc["name"]) is not str or not SEGMENT_FILE.fullmatch(doc["name"]):
            raise _invalid(pointer + "/name")
        if type(doc["sha256"]) is not str or not _CHECKSUM.fullmatch(doc["sha256"]):
            raise _invalid(pointer + "/sha256")
        count = doc["record_count"]
        if type(count) is not int or count < 1:
            raise _invalid(pointer + "/record_count")
        first, last = doc["first_record_id"], doc["last_record_id"]
        if not is_ulid(first) or not is_ulid(last) or first > last:
            raise _invalid(pointer + "/first_record_id")
        if type(doc["expires_at"]) is not str or not _TIMESTAMP.fullmatch(doc["expires_at"]):
            raise _invalid(pointer + "/expires_at")
        return cls(doc["name"], doc["sha256"], count, first, last, doc["expires_at"])

    def holds(self, record_id: str) -> bool:
        return self.first_record_id <= record_id <= self.last_record_id


def _invalid(pointer: str) -> DlqIndexInvalid:
    return DlqIndexInvalid(f"the run index is not a valid dpone.dlq-index.v1 document at {pointer}")


class Listed(Protocol):
    """What a segment's index entry needs of each of its records (a :class:`DlqRecord`, a
    :class:`Line`, a writer's item)."""

    @property
    def record_id(self) -> str: ...

    @property
    def expires_at(self) -> str: ...


def entry_of(name: str, data: bytes | memoryview, records: Sequence[Listed]) -> SegmentEntry:
    """The index entry of segment ``name`` holding ``records`` in record-id order (its bytes
    are ``data``)."""
    return SegmentEntry(
        name=name,
        sha256=bytes_checksum(data),
        record_count=len(records),
        first_record_id=records[0].record_id,
        last_record_id=records[-1].record_id,
        expires_at=max(r.expires_at for r in records),
    )


def encode(lines: Sequence[bytes]) -> bytes:
    """A segment's bytes from sealed record lines (each already ends with a newline)."""
    return b"".join(lines)


# --- reading ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Decoded:
    """A segment read line by line: the records that verify, and each line that does not."""

    records: list[DlqRecord]
    problems: list[tuple[int, DlqError]]


def decode(data: bytes, run_id: str, where: str) -> Decoded:
    """Verify every line of a segment's bytes (checksum, record contract, run, order).

    Line numbers are 1-based. A final line without its newline is a truncated line.
    """
    out = Decoded([], [])
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail:
        lines.append(tail)
    last_id = ""
    for number, line in enumerate(lines, start=1):
        at = f"{where} line {number}"
        try:
            if number == len(lines) and tail:
                raise DlqChecksumMismatch(f"{at} does not verify: the line is truncated")
            record = parse_line(line, run_id, at)
            if record.record_id <= last_id:
                raise DlqRecordInvalid(f"{at} is out of record-id order (a line was moved)")
            last_id = record.record_id
            out.records.append(record)
        except DlqError as err:
            out.problems.append((number, err))
    if not lines:
        out.problems.append((1, DlqChecksumMismatch(f"{where} does not verify: it is empty")))
    return out


def sealed_document(data: bytes, at: str, mismatch: type[DlqError]) -> dict[str, Any]:
    """The JSON object in ``data`` whose checksum member verifies, or ``mismatch`` naming
    ``at`` (a file, or a file and line); never a value."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise mismatch(f"{at} does not verify: it is not a JSON document") from None
    if not isinstance(doc, dict) or not verify_sealed(data, doc):
        raise mismatch(f"{at} does not verify: its checksum does not match")
    return doc


def parse_line(line: bytes, run_id: str, at: str) -> DlqRecord:
    """One sealed record line, verified; typed errors that name the line, never a value."""
    record = DlqRecord.from_json(sealed_document(line, at, DlqChecksumMismatch))
    if record.run_id != run_id:
        raise DlqRecordInvalid(f"{at} holds a record of another run")
    return record


def read_verified(data: bytes, run_id: str, where: str, entry: SegmentEntry) -> list[DlqRecord]:
    """The records of a listed segment: its bytes must be the ones its index entry names.

    Lines are checked first, so that a line that does not verify is named with its number.
    """
    decoded = decode(data, run_id, where)
    if decoded.problems:
        raise decoded.problems[0][1]
    if bytes_checksum(data) != entry.sha256:
        raise DlqChecksumMismatch(
            f"{where} does not verify: its bytes are not the bytes the run index lists"
        )
    records = decoded.records
    if (
        len(records) != entry.record_count
        or records[0].record_id != entry.first_record_id
        or records[-1].record_id != entry.last_record_id
    ):
        raise DlqRecordInvalid(f"{where} does not hold the records its index entry describes")
    return records


def segment_documents(
    data: bytes, where: str, checksums: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """The records of pinned segment bytes as JSON documents, each one a record the index
    lists as it is (``checksums``: the index's record id -> checksum)."""
    lines = data.split(b"\n")
    lines.pop()
    for number, line in enumerate(lines, start=1):
        doc = orjson.loads(line)
        if not isinstance(doc, dict) or checksums.get(doc.get("record_id", "")) != doc.get(
            "sha256"
        ):
            raise DlqIndexDrift(f"{where} line {number} is not a record the index lists as it is")
        yield doc


@frozen
class Line:
    """One line of a segment whose bytes the index pins: its bytes, record id and expiry."""

    data: bytes
    record_id: str
    expires_at: str


_ID_KEY = b'"record_id":"'
_EXPIRES_KEY = b'"expires_at":"'


def pinned_lines(data: bytes, where: str, entry: SegmentEntry) -> list[Line]:
    """The lines of a listed segment, when its bytes are exactly the bytes its index entry
    names, without decoding each record again.

    Every line was verified when the segment was written (or compacted from verified lines),
    and the SHA-256 the index pins covers every byte, so what matters here is where each
    line's record id and expiry are: in canonical key order the top-level ``expires_at`` is
    the first such key (only ``created_at`` and the fixed diagnostics come before it) and
    ``record_id`` the last (only the ref string, the replay block, ``run_id`` and ``schema``
    follow it).
    """
    if bytes_checksum(data) != entry.sha256:
        raise DlqChecksumMismatch(
            f"{where} does not verify: its bytes are not the bytes the run index lists"
        )
    out = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        at = line.rfind(_ID_KEY) + len(_ID_KEY)
        exp = line.find(_EXPIRES_KEY) + len(_EXPIRES_KEY)
        if at < len(_ID_KEY) or exp < len(_EXPIRES_KEY):
            raise DlqRecordInvalid(f"{where} line {number} is not a record line")
        out.append(Line(line + b"\n", line[at : at + 26].decode(), line[exp : exp + 27].decode()))
    if len(out) != entry.record_count:
        raise DlqRecordInvalid(f"{where} does not hold the records its index entry describes")
    return out


# --- writing ------------------------------------------------------------------------------------


def publish(dir_fd: int, name: str, data: bytes | memoryview, where: str) -> bool:
    """Publish ``data`` as ``name``, create-only and durable; ``False`` if ``name`` exists.

    Temp file, fsync, ``link`` to the final name, unlink the temp name, fsync the folder
    (:func:`dpone.durable.link_at`).
    """
    with fsio.os_errors("write", where):
        return durable.link_at(
            dir_fd,
            name,
            data,
            mode=fsio.FILE_MODE,
            before_link=lambda: checkpoint("during_dlq_group_commit"),
        )


__all__ = [
    "SEGMENTS_DIR",
    "SEGMENT_FILE",
    "Decoded",
    "Line",
    "Listed",
    "SegmentEntry",
    "bytes_checksum",
    "compacted_name",
    "decode",
    "encode",
    "entry_of",
    "parse_line",
    "pinned_lines",
    "publish",
    "read_verified",
    "sealed_document",
    "segment_documents",
    "segment_name",
]
