"""Identifiers: the safe-name rule for every path component, and ULIDs (the one generator of
run, load and record ids).

Run, load and record ids become directory and file names, so they are restricted to
``[A-Za-z0-9._-]`` (SPEC §5). dpone also refuses a leading dot: that keeps ``.`` and ``..``
out and leaves dot-names to the stores' own temporary files. The DLQ store turns an unsafe
id into its typed error (:func:`dpone.dlq.fsio.check_identifier`).
"""

from __future__ import annotations

import os
import re
import uuid
from base64 import b32decode
from datetime import datetime
from typing import TypeGuard

IDENTIFIER_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"
ULID_PATTERN = r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$"

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_ULID = re.compile(ULID_PATTERN)

# Crockford's base32 alphabet, and a table to it from the RFC 4648 alphabet b32decode speaks.
_CROCKFORD = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RFC4648 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_FROM_CROCKFORD = bytes.maketrans(_CROCKFORD, _RFC4648)
_RANDOM_BITS = 80
_TIME_MAX = 2**48 - 1


def is_identifier(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def is_ulid(value: object) -> bool:
    return isinstance(value, str) and _ULID.fullmatch(value) is not None


def _encode_time(ms: int) -> str:
    chars = []
    for _ in range(10):
        chars.append(_CROCKFORD[ms & 31])
        ms >>= 5
    return bytes(reversed(chars)).decode("ascii")


def _decode(digits: str) -> int:
    number = 0
    for char in digits.encode("ascii"):
        number = (number << 5) | _CROCKFORD.index(char)
    return number


def ulid_time_ms(value: str) -> int:
    """The millisecond timestamp a ULID carries."""
    return _decode(value[:10])


def ulid_to_uuid(value: str) -> uuid.UUID:
    """The UUID with the same 128 bits as ULID ``value`` (either case); ``ValueError`` if
    ``value`` is not a ULID."""
    upper = value.upper()
    if not is_ulid(upper):
        raise ValueError("not a ULID")
    return uuid.UUID(int=_decode(upper))


class UlidSequence:
    """Monotonic ULIDs: ids of one run sort in the order they were made.

    A batch shares one timestamp and takes consecutive random parts, as the ULID spec's
    monotonic mode does; a clock that stands still or steps back keeps the last timestamp.
    The 80 random bits are 16 base32 digits; consecutive ids share all but the last two
    digits for 1024 ids at a time, so a batch costs one string concatenation per id.
    """

    def __init__(self, after: str | None = None) -> None:
        """Start a sequence; ``after`` (the largest existing id) keeps a resumed run monotonic."""
        self._ms = -1
        self._next = 0
        if after is not None:
            self._ms = ulid_time_ms(after)
            tail = after[10:].encode("ascii").translate(_FROM_CROCKFORD)
            self._next = int.from_bytes(b32decode(tail), "big") + 1

    def batch(self, count: int, now: datetime) -> list[str]:
        """``count`` new ids, all greater than every id this sequence made before."""
        ms = min(int(now.timestamp() * 1000), _TIME_MAX)
        if ms > self._ms:
            self._ms = ms
            self._next = self._random_start()
        elif self._next + count >= 2**_RANDOM_BITS:
            self._ms += 1  # the random part would overflow: borrow the next millisecond
            self._next = self._random_start()
        start = self._next
        self._next = start + count
        return _ulids(_encode_time(self._ms), start, count)

    @staticmethod
    def _random_start() -> int:
        # The top bit clear leaves room for 2**79 increments within one millisecond.
        return int.from_bytes(os.urandom(10), "big") >> 1


def _digits(value: int, count: int) -> str:
    """``value`` as ``count`` Crockford base32 digits, most significant first."""
    chars = bytearray(count)
    for at in range(count - 1, -1, -1):
        chars[at] = _CROCKFORD[value & 31]
        value >>= 5
    return chars.decode("ascii")


#: The 1024 pairs of base32 digits, in order: the last two digits of 1024 consecutive ids.
_PAIRS = [chr(a) + chr(b) for a in _CROCKFORD for b in _CROCKFORD]


def _ulids(prefix: str, start: int, count: int) -> list[str]:
    """``prefix`` + the 16 base32 digits of ``start``, ``start + 1``, ... (``count`` ids)."""
    out: list[str] = []
    value, end = start, start + count
    while value < end:
        low = value & 1023
        take = min(1024 - low, end - value)
        head = prefix + _digits(value >> 10, 14)
        out += [head + pair for pair in _PAIRS[low : low + take]]
        value += take
    return out


def ulids_at(now: datetime, start: int, count: int) -> list[str]:
    """``count`` consecutive ULIDs carrying ``now``'s millisecond, whose 80-bit part starts at
    ``start``: the same arguments always give the same ids (a scale-out task's records)."""
    if not 0 <= start <= start + count <= 2**_RANDOM_BITS:
        raise ValueError("ULID random part out of range")
    return _ulids(_encode_time(min(int(now.timestamp() * 1000), _TIME_MAX)), start, count)


def new_ulid(now: datetime) -> str:
    """One fresh ULID carrying ``now`` (run and load ids; records use :class:`UlidSequence`)."""
    return UlidSequence().batch(1, now)[0]


__all__ = [
    "IDENTIFIER_PATTERN",
    "ULID_PATTERN",
    "UlidSequence",
    "is_identifier",
    "is_ulid",
    "new_ulid",
    "ulid_time_ms",
    "ulid_to_uuid",
    "ulids_at",
]
