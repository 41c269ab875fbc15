"""Where CSV records end when a quoted value may hold line breaks (RFC 4180 with Arrow's rules).

A quote character opens a quoted value only at the start of a field (the start of a line, or
after the delimiter or a lone carriage return); inside, a doubled quote is a literal quote and
a single one closes the value; after it, and in a field that did not start with one, a quote
is a plain character (``5'10"`` is one value). Counting quote characters gets that last case
wrong, so records are found by a regular expression of this grammar, run by ``re`` in C over
whole blocks: no Python loop per row or per quote.
"""

from __future__ import annotations

import re
from collections.abc import Iterator


class Records:
    """Record ends in bytes that start at the start of a record."""

    def __init__(self, delimiter: str, quote: bytes) -> None:
        self.quote = quote
        q, d = re.escape(quote), re.escape(delimiter.encode())
        # One piece of a record outside a line break: text without quotes, a quote in the
        # middle of a field (a plain character), or a whole quoted value. Possessive, so a
        # quoted value that does not close fails here instead of being read another way.
        piece = (
            rb"(?:[^%(q)s\n]++"
            rb"|(?<=[^%(d)s\r\n])%(q)s"
            rb"|(?<![^%(d)s\r\n])%(q)s(?:[^%(q)s]++|%(q)s%(q)s)*+%(q)s)"
        ) % {b"q": q, b"d": d}
        self._pieces = re.compile(rb"%s*+" % piece)
        self._records = re.compile(rb"(?:%s*+\n)*+" % piece)

    def complete(self, data: bytes) -> int:
        """How many bytes of ``data`` are complete records (each ended by a line break)."""
        if self.quote not in data:
            return data.rfind(b"\n") + 1
        match = self._records.match(data)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def first(self, data: bytes) -> int:
        """The length of the first record of ``data`` with its line break; 0 when it does
        not end in ``data``."""
        if self.quote not in data:
            return data.find(b"\n") + 1
        match = self._pieces.match(data)
        assert match is not None
        end = match.end()
        return end + 1 if data[end : end + 1] == b"\n" else 0

    def closed(self, data: bytes) -> bool:
        """Whether ``data``, the end of a file, closes every quoted value it opens."""
        if self.quote not in data:
            return True
        match = self._pieces.match(data)
        assert match is not None
        end = match.end()
        # A line break outside quotes ends a record; the next one starts after it.
        while end < len(data) and data[end] == 0x0A:
            match = self._pieces.match(data, end + 1)
            assert match is not None
            end = match.end()
        return end == len(data)

    def split(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """The records of ``data`` as (index of the line each starts on, from 0; the record
        without its line break); what does not parse as one runs to the end of ``data``."""
        line = start = 0
        while start < len(data):
            match = self._pieces.match(data, start)
            assert match is not None
            end = match.end()
            if end < len(data) and data[end] == 0x0A:
                end += 1
            elif end < len(data):
                end = len(data)  # a quoted value that does not close: the rest is one record
            record = data[start:end]
            yield line, record.removesuffix(b"\n")
            line += record.count(b"\n")
            start = end
