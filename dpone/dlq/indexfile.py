"""Reading a run's index file: bounded, verified (checksum, contract, signature), and not parsed
twice when its bytes are the bytes verified before."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from typing import Any

from dpone import signing
from dpone.canonical import digest_without, skip_signature
from dpone.dlq import fsio, segments
from dpone.dlq.errors import (
    DlqIndexChecksumMismatch,
    DlqIndexInvalid,
    DlqIndexMissing,
    DlqIndexSignatureInvalid,
)
from dpone.dlq.index import DlqIndex
from dpone.dlq.layout import HARD_MAX_INDEX_BYTES, INDEX_FILE, index_where


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
    where = index_where(run_id)
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


__all__ = [
    "IndexCache",
    "check_index_signature",
    "parse_index",
    "read_index_at",
    "sealed_claim",
]
