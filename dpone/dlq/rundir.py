"""A run's folder in the dead-letter store: the layout on disk, the run's writer lock, and
reading a run's index (SPEC §5).

What the store (:mod:`dpone.dlq.store`), its acknowledgements (:mod:`dpone.dlq.acks`),
its deletion (:mod:`dpone.dlq.compaction`), the writer and ``verify`` share. Every folder is
reached through :meth:`dpone.dlq.store.DlqStore.open_path` (directory descriptors, no
symlink followed); the functions here take the descriptors it gives.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from dpone import durable, signing
from dpone.canonical import digest_without, skip_signature
from dpone.dlq import fsio, segments
from dpone.dlq.errors import (
    DlqIndexChecksumMismatch,
    DlqIndexInvalid,
    DlqIndexMissing,
    DlqIndexSignatureInvalid,
)
from dpone.dlq.index import DlqIndex
from dpone.dlq.policy import MAX_INDEX_BYTES, MAX_SEGMENT_BYTES, PiiPolicy
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


def segment_where(run_id: str, name: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}/{name}"


def parse_index(
    data: bytes, run_id: str, where: str, *, require_signature: bool = False
) -> DlqIndex:
    doc = segments.sealed_document(data, where, DlqIndexChecksumMismatch)
    index = DlqIndex.from_json(doc)
    if index.run_id != run_id:
        raise DlqIndexInvalid(f"{where} belongs to another run")
    check_index_signature(doc, where, require=require_signature)
    return index


def check_index_signature(doc: Mapping[str, Any], where: str, *, require: bool) -> None:
    """A present signature verifies when a key is configured; ``require``: it must exist."""
    found = signing.problem(doc, signing.keyring(), require=require, what=where)
    if found is not None:
        code, message = found
        raise DlqIndexSignatureInvalid(f"{message} ({code})", fixes=signing.FIXES[code])


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What an index says about its run besides status and records."""

    run_id: str
    load_id: str
    pipeline: str | None
    created_at: str
    pii_policy: PiiPolicy
    retention_days: int

    @classmethod
    def of(cls, index: DlqIndex) -> RunHeader:
        return cls(
            index.run_id,
            index.load_id,
            index.pipeline,
            index.created_at,
            index.pii_policy,
            index.retention_days,
        )


def name_exists(dir_fd: int, name: str, where: str) -> bool:
    """Whether ``name`` exists in ``dir_fd`` (a symlink there is a path escape)."""
    with fsio.os_errors("inspect", where):
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
    if stat.S_ISLNK(info.st_mode):
        raise fsio.escape(where)
    return True


class IndexCache:
    """Indexes a store verified, each under the SHA-256 of the very bytes it was parsed from.

    A file whose bytes hash the same is the same file: its index is returned without parsing
    and checking every entry again (retention reads each index when it plans and again when
    it applies). What a read checks besides the bytes is the signature, under the keyring of
    the moment: an entry holds for that keyring only. Bounded by the records it holds.
    """

    def __init__(self, max_records: int = 2_000_000) -> None:
        self.max_records = max_records
        self._held: dict[str, tuple[bytes, object, DlqIndex]] = {}
        self._records = 0
        self._lock = threading.Lock()

    def get(self, run_id: str, digest: bytes) -> DlqIndex | None:
        held = self._held.get(run_id)
        if held is None or held[0] != digest or held[1] is not signing.keyring():
            return None
        return held[2]

    def put(self, run_id: str, digest: bytes, index: DlqIndex) -> None:
        ring = signing.keyring()
        with self._lock:
            self._drop(run_id)
            if index.record_count > self.max_records:
                return
            while self._held and self._records + index.record_count > self.max_records:
                self._drop(next(iter(self._held)))
            self._held[run_id] = (digest, ring, index)
            self._records += index.record_count

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        held = self._held.pop(run_id, None)
        if held is not None:
            self._records -= held[2].record_count


def read_index_at(
    run_fd: int,
    run_id: str,
    known: DlqIndex | None = None,
    *,
    require_signature: bool = False,
    cache: IndexCache | None = None,
) -> DlqIndex:
    """The run's verified index. ``known`` is an index this process verified before: when the
    file's bytes are the sealed bytes of that very document (same checksum, and the bytes
    hash to it), it is returned without parsing a million entries again. ``cache`` holds the
    indexes verified before by their bytes (:class:`IndexCache`)."""
    where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
    data = fsio.read_file(run_fd, INDEX_FILE, where, HARD_MAX_INDEX_BYTES)
    if data is None:
        raise DlqIndexMissing(f"{where} does not exist")
    if len(data) > HARD_MAX_INDEX_BYTES:
        raise DlqIndexInvalid(f"{where} is larger than any DLQ index may be")
    if known is not None and known.run_id == run_id and sealed_claim(data) == known.sha256:
        return known
    if cache is None or (require_signature and not signing.configured()):
        return parse_index(data, run_id, where, require_signature=require_signature)
    digest = hashlib.sha256(data).digest()
    index = cache.get(run_id, digest)
    if index is None:
        index = parse_index(data, run_id, where)
        cache.put(run_id, digest, index)
    if require_signature and index.signature is None:
        # A cached index had its present signature verified under this keyring; only its
        # absence is left to refuse.
        check_index_signature({}, where, require=True)
    return index


_SEALED_SHA = re.compile(rb',"sha256":"(sha256:[0-9a-f]{64})"')


def sealed_claim(data: bytes) -> str | None:
    """The checksum a document in dpone's sealed form carries, when its bytes hash to it.

    In the canonical form the top-level checksum member is the only one followed by the
    members after ``sha256`` in key order, so the last match of the member is taken, and
    the bytes without it must hash to its value; anything else gives ``None``.
    """
    found = _SEALED_SHA.match(data, max(data.rfind(b',"sha256":"sha256:'), 0))
    if found is None:
        return None
    end = skip_signature(data, found.end())
    claim = found.group(1).decode()
    digest = digest_without(data, found.start(), end)
    return claim if digest is not None and "sha256:" + digest == claim else None


def take_lock(run_fd: int, where: str, *, create: bool) -> int | None:
    """Take the run's writer lock without waiting; ``None`` if a live process holds it.

    ``flock`` locks belong to the open file, so the kernel drops them when their holder dies
    (SIGKILL included): a lock that can be taken means the writer is gone.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    with fsio.os_errors("lock", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, flags, fsio.FILE_MODE, dir_fd=run_fd)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _still_named(fd, run_fd):
                # The holder released it and removed the name between our open and our
                # flock: this lock is on a file nobody else will look at any more.
                os.close(fd)
                return take_lock(run_fd, where, create=create) if create else None
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def _still_named(fd: int, run_fd: int) -> bool:
    """Whether ``LOCK_FILE`` in ``run_fd`` is still the file open as ``fd``."""
    try:
        named = os.stat(LOCK_FILE, dir_fd=run_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def writer_alive(run_fd: int, where: str) -> bool:
    """Whether a live process holds the run's writer lock (nothing is created or changed)."""
    with fsio.os_errors("inspect", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=run_fd)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def release_lock(run_fd: int, lock_fd: int) -> None:
    """Remove the lock file, then let go of the lock (the run is no longer being written).

    Removing the name while still holding the lock is what makes it safe: a process that
    opened the old file meanwhile gets the lock only after we let go, and then sees that
    the name is gone (:func:`take_lock` checks the inode after ``flock``) and backs off.
    """
    durable.unlink_quietly(run_fd, LOCK_FILE)
    os.close(lock_fd)


__all__ = [
    "ACKS_DIR",
    "HARD_MAX_INDEX_BYTES",
    "HARD_MAX_SEGMENT_BYTES",
    "INDEX_FILE",
    "LOCK_FILE",
    "NEW_RUN_PREFIX",
    "RUNS_DIR",
    "SEGMENTS_DIR",
    "IndexCache",
    "RunHeader",
    "check_index_signature",
    "dumps",
    "name_exists",
    "parse_index",
    "read_index_at",
    "release_lock",
    "sealed_claim",
    "segment_where",
    "take_lock",
    "writer_alive",
]
