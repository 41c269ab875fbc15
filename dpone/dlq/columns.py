"""Index entries handled as whole columns: the checks and checksums that an index of a
million entries needs without a Python object or a regex per entry.

Each fast path proves what the general one would (canonical JSON, the entry contract) on
the columns at once, and falls back to the general way when it cannot.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import orjson

from dpone.canonical import CHECKSUM_PREFIX, checksum, fast_path_ok
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.model import MAX_NAME_LENGTH

ENTRY_KEYS = frozenset({"record_id", "sha256", "code", "column"})
_PLAIN = re.compile(r"[A-Za-z0-9:._-]*")
_ULID_LEN = 26
_CHECKSUM_LEN = len("sha256:") + 64
# One string object per code (the entries of an index share them).
CODE_TEXT = {code.value: code.value for code in ReasonCode}
_ID_OF = itemgetter("record_id")
_SHA_OF = itemgetter("sha256")
_CODE_OF_ENTRY = itemgetter("code")
_COLUMN_OF = itemgetter("column")
_ULID_ALPHABET = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every hex digit to "x" (and "x" itself away): a column of checksums becomes "sha256:"
# with its digits as "x"s.
_DIGITS_AS_X = bytes.maketrans(b"0123456789abcdefx", b"x" * 16 + b"\0")
_CHECKSUM_AS_X = CHECKSUM_PREFIX.encode().translate(_DIGITS_AS_X) + b"x" * 64

#: An index's records as four columns in record-id order: ids, checksums, codes, columns.
Columns = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str | None, ...]]


def pairs_checksum(pairs: list[tuple[str, str]]) -> str:
    """``checksum([[a, b], ...])`` of sorted string pairs.

    Ids and checksums are plain ASCII without quotes or escapes, whose canonical JSON is the
    bytes joined here: this skips walking a list of up to a million pairs to prove it (an
    index is read by every plan). Any other string goes the general way.
    """
    return columns_checksum([a for a, _ in pairs], [b for _, b in pairs])


def columns_checksum(firsts: Sequence[str], seconds: Sequence[str], *, plain: bool = False) -> str:
    """:func:`pairs_checksum` of ``zip(firsts, seconds)``, from the two columns.

    ``plain``: the caller checked that every string is a record id or a ``sha256:`` checksum
    (no quote, backslash or control character), so the joined bytes are the canonical JSON.
    """
    if not firsts:
        return checksum([])
    if plain or (_plain(firsts) and _plain(seconds)):
        body = '"],["'.join(map('","'.join, zip(firsts, seconds, strict=True)))
        return "sha256:" + hashlib.sha256(f'[["{body}"]]'.encode()).hexdigest()
    return checksum([[a, b] for a, b in zip(firsts, seconds, strict=True)])


def _plain(values: Sequence[str]) -> bool:
    """Whether every value is a string of ``[A-Za-z0-9:._-]`` (its JSON is itself, quoted)."""
    return set(map(type, values)) <= {str} and _PLAIN.fullmatch("".join(values)) is not None


def index_checksum(doc: dict[str, Any]) -> str:
    """``checksum(doc)`` of an index document. Its entries are flat objects of four ASCII
    keys: when every value is a string or null (what the store writes), the canonical form
    is orjson's with sorted keys, without walking every entry to prove it value by value."""
    records = doc["records"]
    head = {key: value for key, value in doc.items() if key != "records"}
    if not (fast_path_ok(head) and _plain_entries(records)):
        return checksum(doc)
    try:
        data = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return checksum(doc)  # raises the canonical error
    return CHECKSUM_PREFIX + hashlib.sha256(data).hexdigest()


def _plain_entries(records: Any) -> bool:
    """Whether ``records`` is a list of objects of exactly the four entry keys whose values
    are strings or null (exact types, as :func:`fast_path_ok` wants them)."""
    if type(records) is not list or not set(map(type, records)) <= {dict}:
        return False
    if not set(map(len, records)) <= {len(ENTRY_KEYS)}:
        return False
    try:
        values = set(map(type, map(_ID_OF, records)))
        values.update(map(type, map(_SHA_OF, records)))
        values.update(map(type, map(_CODE_OF_ENTRY, records)))
        values.update(map(type, map(_COLUMN_OF, records)))
    except KeyError:
        return False
    return values <= {str, type(None)}


def entry_columns(items: list[Any]) -> Columns | None:
    """The entries of an index as columns, every entry checked, column by column over all
    entries at once (an index holds up to a million entries and is read by every replay and
    retention plan); ``None`` when any entry fails (for the caller to find which)."""
    try:
        # Whole-list checks in C: objects of four keys, each of the four found; one regex
        # over the joined ids (each 26 long); every checksum's prefix, then its hex digits
        # at once; the few distinct codes and columns alone.
        if all(map(dict.__instancecheck__, items)) and set(map(len, items)) <= {4}:
            ids = tuple(map(_ID_OF, items))
            shas = tuple(map(_SHA_OF, items))
            codes = tuple(map(_CODE_OF_ENTRY, items))
            columns = tuple(map(_COLUMN_OF, items))
            if (
                set(map(len, ids)) <= {_ULID_LEN}
                and set(map(len, shas)) <= {_CHECKSUM_LEN}
                and are_ulids(ids)
                and are_checksums(shas)
                and set(codes) <= CODE_TEXT.keys()
                and all(column_ok(c) for c in set(columns))
            ):
                return ids, shas, tuple(map(CODE_TEXT.__getitem__, codes)), columns
    except (TypeError, KeyError):
        pass
    return None


def are_ulids(ids: Sequence[str]) -> bool:
    """Whether strings of 26 characters each are all ULIDs, judged on their concatenation:
    Crockford base-32 characters only, and every first one 0 to 7."""
    text = "".join(ids)
    if not text.isascii():
        return False
    data = text.encode("ascii")
    return not data.translate(None, _ULID_ALPHABET) and not data[0::_ULID_LEN].translate(
        None, b"01234567"
    )


def are_checksums(shas: Sequence[str]) -> bool:
    """Whether strings of 71 characters each are all ``sha256:`` and 64 lowercase hex
    digits, judged on their concatenation: the prefix at its place in each (stride by
    stride), and the whole once every digit is made an ``x``."""
    text = "".join(shas)
    if not text.isascii():
        return False
    count = len(shas)
    if any(text[at::_CHECKSUM_LEN] != char * count for at, char in enumerate(CHECKSUM_PREFIX)):
        return False
    return text.encode("ascii").translate(_DIGITS_AS_X) == _CHECKSUM_AS_X * count


def column_ok(column: Any) -> bool:
    return column is None or (type(column) is str and 0 < len(column) <= MAX_NAME_LENGTH)


__all__ = [
    "CODE_TEXT",
    "ENTRY_KEYS",
    "Columns",
    "are_checksums",
    "are_ulids",
    "column_ok",
    "columns_checksum",
    "entry_columns",
    "index_checksum",
    "pairs_checksum",
]
