"""The record ids and checksums of an ack segment read on its bytes, without building an
acknowledgement per line: retention reads every ack segment of every run it plans over, and
in the form dpone writes one SHA-256 per line proves what a full parse would."""

from __future__ import annotations

import hashlib

import orjson

_ACK_ID_KEY = b'"record_id":"'
_ACK_SHA_KEY = b',"sha256":"sha256:'
_ACK_SCHEMA_MEMBER = b',"schema":"dpone.dlq-replay-ack.v1"'
_ULID_ALPHABET = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def sealed_ack_columns(data: bytes, run_id: str) -> tuple[list[str], list[str]] | None:
    """``(record ids, ack checksums)``, line by line, of an ack segment whose every line is in
    the form dpone writes (canonical JSON with its checksum member inserted) and hashes to
    its checksum; ``None`` when any line is not (for the caller to judge it in full).

    In that form an acknowledgement is flat, its members in key order: ``run_id``, then
    ``schema``, then ``sha256``, then ``target_identity``. A JSON string cannot hold a bare
    quote, so ``,"sha256":"sha256:`` and ``"record_id":"`` can only be members; each must be
    on every line exactly once (counted over the whole segment, every line having one). The
    bytes of a line without its checksum member must hash to it: one SHA-256 per line, the
    rest is found where it was on the line before (the lines of one replay look alike).
    """
    lines = data.split(b"\n")
    if lines.pop() or not lines:
        return None
    before = b',"run_id":' + orjson.dumps(run_id) + _ACK_SCHEMA_MEMBER
    width = len(before)
    key, key_len, id_key, id_len = _ACK_SHA_KEY, len(_ACK_SHA_KEY), _ACK_ID_KEY, len(_ACK_ID_KEY)
    sha256 = hashlib.sha256
    rest = at = 0  # bytes after the checksum member, and where the id member starts
    ids: list[bytes] = []
    claimed: list[bytes] = []
    hexes: list[str] = []
    for line in lines:
        end = len(line) - rest
        if end < width or not line.startswith(key, end):
            end = line.rfind(key)
            rest = len(line) - end
        if not line.startswith(id_key, at):
            at = line.find(id_key)
        if at < 0 or end < width or not line.startswith(before, end - width):
            return None
        claimed.append(line[end + key_len : end + key_len + 65])  # 64 digits and the quote
        hexes.append(sha256(line[:end] + line[end + key_len + 65 :]).hexdigest())
        ids.append(line[at + id_len : at + id_len + 27])  # the id and its closing quote
    count = len(lines)
    digests = '"'.join(hexes) + '"'
    joined = b"".join(ids)
    if (
        data.count(key) != count
        or data.count(id_key) != count
        or b"".join(claimed) != digests.encode()
        or not _ulids_quoted(joined, count)
    ):
        return None
    record_ids = joined.decode().split('"')
    checksums = ("sha256:" + digests.replace('"', '"sha256:')).split('"')
    return record_ids[:-1], checksums[:-1]


def _ulids_quoted(joined: bytes, count: int) -> bool:
    """Whether ``joined`` is ``count`` ULIDs, each followed by a quote."""
    return (
        len(joined) == 27 * count
        and joined[26::27] == b'"' * count
        and not joined[0::27].translate(None, b"01234567")
        and not joined.translate(None, _ULID_ALPHABET + b'"')
    )


__all__ = ["sealed_ack_columns"]
