"""Where CSV records end when a quoted value may hold line breaks (RFC 4180 with Arrow's rules).

A quote character opens a quoted value only at the start of a field (the start of a line, or
after the delimiter or a lone carriage return); inside, a doubled quote is a literal quote and
a single one closes the value; after it, and in a field that did not start with one, a quote
is a plain character (``5'10"`` is one value). Counting quote characters gets that last case
wrong, so records are found by a regular expression of this grammar, run by ``re`` in C over
whole blocks: no Python loop per row or per quote.

The expression that finds a block's complete records skips from one quote to the next
(``[^"]*+`` is ``re``'s tightest loop) and never looks at a line break: a line break outside
every quoted value is a record's end, so the block's last one is found with ``rfind`` in what
follows the last quoted value. Only when the unfinished record at the end of a block holds a
quote is the block scanned again, up to that record; a few such steps, and a last slow scan
line by line, bound the work on any input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: Scans from the start again, each to an earlier line break, before the scan line by line.
_RESCANS = 3


class Records:
    """Record ends in bytes that start at the start of a record."""

    def __init__(self, delimiter: str, quote: bytes) -> None:
        self.quote = quote
        q, d = re.escape(quote), re.escape(delimiter.encode())
        # A quote in the middle of a field (a plain character), or a whole quoted value.
        # Possessive, so a quoted value that does not close fails here instead of being
        # read another way.
        token = (
            rb"(?:(?<=[^%(d)s\r\n])%(q)s"
            rb"|(?<![^%(d)s\r\n])%(q)s(?:[^%(q)s]++|%(q)s%(q)s)*+%(q)s)"
        ) % {b"q": q, b"d": d}
        # One piece of a record outside a line break: text without quotes, or a token.
        piece = rb"(?:[^%(q)s\n]++|%(t)s)" % {b"q": q, b"t": token}
        self._pieces = re.compile(rb"%s*+" % piece)
        self._records = re.compile(rb"(?:%s*+\n)*+" % piece)
        #: From quote to quote, line breaks and all: where the bytes stop parsing (at a
        #: quoted value that does not close, or at their end), after their last token.
        self._tokens = re.compile(rb"(?:[^%(q)s]*+%(t)s)*+" % {b"q": q, b"t": token})

    def complete(self, data: bytes) -> int:
        """How many bytes of ``data`` are complete records (each ended by a line break)."""
        if self.quote not in data:
            return data.rfind(b"\n") + 1
        end = len(data)
        for _ in range(_RESCANS):
            match = self._tokens.match(data, 0, end)
            assert match is not None  # the pattern matches the empty string
            after = match.end()  # after the last token; a quote after it opens a value
            opened = data.find(self.quote, after, end)  # that does not close before ``end``
            if opened < 0 and end < len(data):
                return end + 1  # ``end`` is a line break, and no quoted value holds it
            newline = data.rfind(b"\n", after, end if opened < 0 else opened)
            if newline >= 0:
                return newline + 1
            # The line breaks after the last token are in a quoted value, or there are
            # none: the last record ends before that token. Scan again, to the line break
            # before it.
            end = data.rfind(b"\n", 0, after)
            if end < 0:
                return 0
        match = self._records.match(data)
        assert match is not None
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
        match = self._tokens.match(data)
        assert match is not None
        # After the last token the bytes hold no quote, or one that opens a value that
        # does not close.
        return data.find(self.quote, match.end()) < 0

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
