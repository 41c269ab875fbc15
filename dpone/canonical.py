"""RFC 8785 canonical JSON and the ``sha256:`` checksums built on it (SPEC §5).

Every checksum in the store is ``"sha256:" + hex(SHA-256(JCS(doc without its checksum)))``.
The ``rfc8785`` package is the reference implementation and the oracle of the tests, but it
is pure Python (about 60 µs for one DLQ record), which alone would eat most of the write
budget. :func:`canonical_json` therefore takes a fast path through orjson for the documents
where orjson's output is *provably the same bytes*, and hands everything else to ``rfc8785``:

* strings: orjson escapes exactly what RFC 8785 escapes (``"``, ``\\``, the C0 controls with
  the same short forms and lowercase ``\\u00xx``) and writes everything else as raw UTF-8 —
  checked for every code point in the tests;
* integers within the I-JSON range print the same (outside it RFC 8785 refuses them);
* keys: orjson sorts by UTF-8 bytes, RFC 8785 by UTF-16 code units; the two orders agree on
  ASCII keys, so the fast path requires every key to be ASCII;
* no floats (ECMAScript number formatting differs from orjson's), no subclasses of str/int.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson
import rfc8785

CHECKSUM_PREFIX = "sha256:"
CHECKSUM_PATTERN = r"^sha256:[0-9a-f]{64}$"
_I_JSON_MAX = 2**53 - 1


class CanonicalizationError(ValueError):
    """The document cannot be canonicalized (a float NaN, an integer beyond 2**53, ...)."""


def fast_path_ok(doc: Any) -> bool:
    """True when orjson with sorted keys writes the RFC 8785 bytes of ``doc``."""
    stack = [doc]
    pop, extend = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is str or value is None or kind is bool:
            continue
        if kind is int:
            if -_I_JSON_MAX <= value <= _I_JSON_MAX:
                continue
            return False
        if kind is dict:
            for key in value:
                if type(key) is not str or not key.isascii():
                    return False
            extend(value.values())
            continue
        if kind is list or kind is tuple:
            extend(value)
            continue
        return False
    return True


def canonical_json(doc: Any) -> bytes:
    """The RFC 8785 (JCS) serialization of ``doc``."""
    try:
        if fast_path_ok(doc):
            return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
        return rfc8785.dumps(doc)
    except (TypeError, ValueError, orjson.JSONEncodeError) as exc:
        raise CanonicalizationError(f"not canonicalizable: {type(exc).__name__}") from None


def checksum(doc: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``doc``."""
    return CHECKSUM_PREFIX + hashlib.sha256(canonical_json(doc)).hexdigest()


#: A keyed signature (``dpone.signing``) sits next to the checksum and is not covered by it.
SIGNATURE_MEMBER = "signature"


def checksum_of(doc: Mapping[str, Any], member: str = "sha256") -> str:
    """The checksum ``doc`` should carry: over every member but its own checksum member
    (and its ``signature``, which covers the same bytes)."""
    return checksum({k: v for k, v in doc.items() if k not in (member, SIGNATURE_MEMBER)})


def verify_checksum(doc: Mapping[str, Any], member: str = "sha256") -> bool:
    """Whether ``doc[member]`` is the checksum of the rest of ``doc``."""
    claimed = doc.get(member)
    if not isinstance(claimed, str):
        return False
    try:
        return claimed == checksum_of(doc, member)
    except CanonicalizationError:
        return False


def verify_sealed(data: bytes, doc: Mapping[str, Any], member: str = "sha256") -> bool:
    """Whether ``doc``, parsed from ``data``, carries the checksum of the rest of itself.

    Fast path for what dpone writes: a document in canonical form with its checksum member
    inserted in key order. Removing that member from the bytes gives back the bytes the
    checksum was computed over, so one SHA-256 of the bytes checks the line without
    canonicalizing the parsed document again (which costs more than parsing it). Bytes in any
    other form (or that do not hash right) get the full check, so a document another tool
    wrote in another valid JSON form still verifies.
    """
    claimed = doc.get(member)
    if not isinstance(claimed, str) or not claimed.startswith(CHECKSUM_PREFIX):
        return False
    text = b'"' + member.encode() + b'":"' + claimed.encode() + b'"'
    at = data.rfind(text)
    if at > 0:
        end = skip_signature(data, at + len(text))
        if data[at - 1 : at] == b",":
            digest = digest_without(data, at - 1, end)
        elif data[end : end + 1] == b",":
            digest = digest_without(data, at, end + 1)
        else:
            digest = None
        if digest == claimed[len(CHECKSUM_PREFIX) :]:
            return True
    return verify_checksum(doc, member)


def digest_without(data: bytes, start: int, stop: int) -> str | None:
    """Hex SHA-256 of ``(data[:start] + data[stop:]).rstrip(b"\\n")`` without copying
    ``data`` (an index is up to 512 MiB); ``None`` when that is empty."""
    size = len(data)
    if stop < size - 1 and data[size - 1] == 10 and data[size - 2] != 10:
        size -= 1  # the usual case: one final newline, after something that is not one
    elif not (stop < size and data[size - 1] != 10):  # the rare other cases
        body = (data[:start] + data[stop:]).rstrip(b"\n")
        return hashlib.sha256(body).hexdigest() if body else None
    view = memoryview(data)
    digest = hashlib.sha256(view[:start])
    digest.update(view[stop:size])
    return digest.hexdigest()


def skip_signature(data: bytes, end: int) -> int:
    """In sealed bytes, the end of the checksum member at ``end`` plus the ``signature``
    member that follows it in key order, if any (its object holds only strings without
    braces, so its first ``}`` closes it)."""
    if data.startswith(b',"signature":{', end):
        close = data.find(b"}", end)
        if close > 0:
            return close + 1
    return end


def with_checksum(doc: dict[str, Any], member: str = "sha256") -> dict[str, Any]:
    """``doc`` plus its checksum member (a new dict)."""
    out = dict(doc)
    out.pop(member, None)
    out[member] = checksum_of(out, member)
    return out


__all__ = [
    "CHECKSUM_PATTERN",
    "CHECKSUM_PREFIX",
    "SIGNATURE_MEMBER",
    "CanonicalizationError",
    "canonical_json",
    "checksum",
    "checksum_of",
    "digest_without",
    "fast_path_ok",
    "skip_signature",
    "verify_checksum",
    "verify_sealed",
    "with_checksum",
]
