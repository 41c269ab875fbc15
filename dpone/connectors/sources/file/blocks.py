"""Blocks of whole lines: how CSV and JSONL files are read, a block of bytes at a time."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from typing import Any

from dpone.connectors.errors import SourceRowTooLong
from dpone.connectors.fs import SourceFile
from dpone.connectors.sources.file.quotes import Records
from dpone.records import frozen

#: How much of an undecodable line a DecodeFailure keeps (for ``pii_policy: preserve``).
MAX_FAILURE_TEXT = 16 << 10
#: Tentative blocks refused (less those taken) before a file's blocks are no longer cut
#: tentatively (see record_blocks).
TENTATIVE_REFUSALS = 3


class Tentative:
    """A block cut at its bytes' last line break before anyone knew that break ends a record
    (see :func:`record_blocks`): the CSV reader, which parses it anyway, says whether it did
    (it did when Arrow made one row of each line); when it did not, ``refused`` is set and the
    reader yields nothing of the block, which comes again cut where its last record ends."""

    __slots__ = ("refused",)

    def __init__(self) -> None:
        self.refused = False


@frozen
class Block:
    """Whole lines of a file as UTF-8 bytes (invalid bytes kept as they are), from ``line``;
    ``newlines`` counts its line breaks when known (-1: not counted)."""

    data: bytes | memoryview
    line: int
    newlines: int = -1
    #: For a view (see row_blocks), what the CSV reader would look for in its bytes: whether
    #: it holds a quote character, and a \r that is not part of a \r\n.
    quoted: bool | None = None
    lone_cr: bool | None = None
    #: The block is one line that opens a quoted value which does not close within
    #: ``max_row_bytes`` or before the end of the file (see :func:`record_blocks`).
    open_quote: bool = False
    #: Cut at a line break not known to end a record: the reader checks it (see Tentative).
    tentative: Tentative | None = None

    @property
    def raw(self) -> bytes:
        """The block's bytes (a copy of a view)."""
        return self.data if isinstance(self.data, bytes) else bytes(self.data)

    def as_bytes(self) -> Block:
        """The same block holding bytes (a view is valid only until the next block)."""
        if isinstance(self.data, bytes):
            return self
        return Block(bytes(self.data), self.line, self.newlines)


def line_blocks(
    path: SourceFile,
    partition: str,
    encoding: str,
    block_size: int,
    max_row_bytes: int,
) -> Iterator[Block]:
    """The file (decompressed by extension: .gz, .bz2, .zst, ...) in blocks that end at a
    newline; a line longer than ``max_row_bytes`` is :class:`SourceRowTooLong`."""
    line = 1
    pending = b""
    # Reads no longer than the limit: a line past it then always spans two reads, where the
    # check below sees it.
    read_size = min(block_size, max_row_bytes)
    with path.open_stream() as stream:
        for data, eof in _decoded(stream, encoding, lambda: read_size):
            buf = pending + data if pending else data
            cut = buf.rfind(b"\n")
            if (cut < 0 and len(buf) > max_row_bytes) or buf.find(b"\n") > max_row_bytes:
                raise row_too_long(partition, line, max_row_bytes)
            if eof:
                if buf:
                    yield Block(buf, line, buf.count(b"\n"))
                return
            if cut < 0:
                pending = buf
                continue
            block, pending = buf[: cut + 1], buf[cut + 1 :]
            newlines = block.count(b"\n")
            yield Block(block, line, newlines)
            line += newlines


def record_blocks(
    path: SourceFile,
    partition: str,
    encoding: str,
    block_size: int,
    max_row_bytes: int,
    records: Records,
) -> Iterator[Block]:
    """The CSV file (decompressed by extension) in blocks of whole records, where a quoted
    value may span lines.

    A quoted value that does not close within ``max_row_bytes`` of its record's start, or
    before the end of the file, would take every line after it: instead the record's first
    line comes out alone as an ``open_quote`` block (a decode failure of that line), and
    reading goes on from the next line. A line longer than ``max_row_bytes`` is
    :class:`SourceRowTooLong`.

    Where the bytes hold a quote, finding the last record's end means reading every quoted
    value from the start (``Records.complete``: Python's ``re``, which holds the GIL, 0.2 s
    of a 1,000,000-row file). Most files hold no line break inside a value, so each read's
    bytes are first handed over cut at their last line break, as a :class:`Tentative` view
    (no copy); the CSV reader parses them, Arrow's own grammar deciding, and only when Arrow
    did not make one row of each line (or failed) are the bytes cut where ``Records`` says
    and handed over again. A file whose blocks keep being refused (its values hold line
    breaks throughout, or blank lines) stops being cut tentatively: each refusal costs a parse,
    so a file pays at most :data:`TENTATIVE_REFUSALS` more of them than it had blocks taken.
    """
    line = 1
    pending = b""
    refusals = 0  # tentative blocks refused, less those taken
    read_size = min(block_size, max_row_bytes)

    def next_read() -> int:
        # A record longer than a read grows the read with it, so that the record's bytes are
        # looked at a bounded number of times on the way to ``max_row_bytes``.
        return max(read_size, min(len(pending), max_row_bytes + 1 - len(pending)))

    with path.open_stream() as stream:
        for data, eof in _decoded(stream, encoding, next_read):
            buf = pending + data if pending else data
            again = False
            while buf:
                first_line = buf.find(b"\n")
                if first_line > max_row_bytes or (first_line < 0 and len(buf) > max_row_bytes):
                    raise row_too_long(partition, line, max_row_bytes)
                cut = buf.rfind(b"\n") + 1
                # Not the file's first block: its header names the columns the check needs.
                tentative = line > 1 and refusals < TENTATIVE_REFUSALS and not again
                if tentative and not eof and cut and records.quote in buf:
                    block = _tentative(buf, cut, line)
                    yield block
                    assert block.tentative is not None
                    if not block.tentative.refused:
                        refusals = max(refusals - 1, 0)
                        buf = buf[cut:]
                        line += block.newlines
                        continue
                    # The same bytes, cut where their last record ends, and no other
                    # tentative cut before the next read.
                    refusals += 1
                    again = True
                end = records.complete(buf)
                # Only the first record can be longer than the limit: the others start in
                # the bytes just read, which are no more than the limit.
                if end > max_row_bytes + 1 and records.first(buf) > max_row_bytes + 1:
                    end = -1
                if end > 0:
                    data, buf = buf[:end], buf[end:]
                    newlines = data.count(b"\n")
                    yield Block(data, line, newlines)
                    line += newlines
                    continue
                if end == 0 and not eof and len(buf) <= max_row_bytes:
                    break  # the record goes on in the next read
                if end == 0 and eof and records.closed(buf):
                    yield Block(buf, line, buf.count(b"\n"))
                    buf = b""
                    break
                # A quoted value that does not close: its record's first line is one bad line.
                cut = len(buf) if first_line < 0 else first_line + 1
                yield Block(buf[:cut], line, int(first_line >= 0), open_quote=True)
                buf = buf[cut:]
                line += 1
            pending = buf
            if eof:
                return


def _tentative(buf: bytes, cut: int, line: int) -> Block:
    """``buf`` up to ``cut`` (after a line break), a view, for the reader to check."""
    lone_cr = buf.find(b"\r", 0, cut) >= 0 and buf.count(b"\r", 0, cut) != buf.count(
        b"\r\n", 0, cut
    )
    view = memoryview(buf)[:cut]
    return Block(view, line, buf.count(b"\n", 0, cut), True, lone_cr, tentative=Tentative())


def _decoded(
    stream: Any, encoding: str, read_size: Callable[[], int]
) -> Iterator[tuple[bytes, bool]]:
    """(UTF-8 bytes, whether the file ended) of successive reads of ``read_size()`` bytes; the
    last one is empty. A UTF-8 byte order mark at the start is dropped."""
    utf8 = codecs.lookup(encoding).name == "utf-8"
    decoder = None if utf8 else codecs.getincrementaldecoder(encoding)("surrogateescape")
    first = True
    while True:
        data = stream.read(read_size())
        eof = not data
        if decoder is not None:
            # Bytes that do not decode survive as themselves and fail Arrow's UTF-8 check,
            # which pins them to their line.
            data = decoder.decode(data, final=eof).encode("utf-8", "surrogateescape")
        if first and data:
            data = data.removeprefix(b"\xef\xbb\xbf")
            first = False
        yield data, eof
        if eof:
            return


def row_blocks(
    path: SourceFile,
    partition: str,
    encoding: str,
    block_size: int,
    max_row_bytes: int,
    *,
    lines: int,
    first_extra: int,
    quote: bytes | None,
) -> Iterator[Block]:
    """The file (decompressed by extension) in blocks of exactly ``lines`` lines, the first one
    ``first_extra`` more (the header, which comes as a block of its own when it can) and the
    last one what is left; a line longer than ``max_row_bytes`` is :class:`SourceRowTooLong`.

    The file is read ``block_size`` bytes at a time into one buffer that every block reuses:
    a block is a view of it, valid until the next block is asked for (the CSV reader is done
    with it by then: Arrow copies what it parses). Each read's line breaks are counted once.
    Memory stays at about one chunk's bytes, and no chunk-sized object is made per chunk.
    """
    utf8 = codecs.lookup(encoding).name == "utf-8"
    decoder = None if utf8 else codecs.getincrementaldecoder(encoding)("surrogateescape")
    # Reads no longer than the limit: a line past it then always spans two reads, where the
    # check in _Lines.took sees it.
    read_size = min(block_size, max_row_bytes)
    buf = _Lines(2 * read_size, max_row_bytes)
    line = 1
    want = lines + first_extra
    fresh = True  # nothing read yet
    with path.open_stream() as stream:
        while True:
            raw = b""
            if decoder is None:
                got = stream.readinto(buf.room(read_size, want))
            else:
                raw = stream.read(read_size)
                # Bytes that do not decode survive as themselves and fail Arrow's UTF-8
                # check, which pins them to their line.
                text = decoder.decode(raw, final=not raw).encode("utf-8", "surrogateescape")
                got = len(text)
                buf.room(got, want)[:] = text
            if fresh and got:
                fresh = False
                got -= buf.skip_bom(got)
            if got:
                buf.took(got, partition, line)
                if want > lines:
                    # The header (and blank lines before it) as a block of its own: its
                    # reader takes the header off a small block, not off a chunk of bytes.
                    head = buf.head()
                    if head is not None:
                        count = head.count(b"\n")
                        yield Block(head, line, count)
                        line, want = line + count, lines
            while buf.have >= want:
                yield buf.block(want, line, quote)
                line, want = line + want, lines
            if not got and (decoder is None or not raw):
                if buf.end > buf.begin:
                    yield buf.block(buf.have, line, quote, to_end=True)
                return


class _Lines:
    """The bytes read and not handed out as a block yet (``buf[begin:end]``), with their line
    breaks counted once as they are read (``have``); one buffer that every block reuses."""

    def __init__(self, size: int, limit: int) -> None:
        self.limit = limit  # max_row_bytes
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)
        self.begin = self.end = 0
        self.have = 0
        self.partial = 0  # bytes of the line being read (after the last line break)

    def room(self, size: int, want: int) -> memoryview:
        """Where the next ``size`` bytes go: what is left moves to the front, or the buffer
        grows to what ``want`` lines take at the line length so far, and a tenth."""
        if self.end + size > len(self.buf):
            left = self.end - self.begin
            if left + size > len(self.buf):
                need = (left * want // self.have) * 11 // 10 if self.have else 2 * len(self.buf)
                buf = bytearray(max(need, left) + size)
                buf[:left] = self.view[self.begin : self.end]
                self.buf, self.view = buf, memoryview(buf)
            else:
                self.view[:left] = self.view[self.begin : self.end]  # memoryview copies safely
            self.begin, self.end = 0, left
        return self.view[self.end : self.end + size]

    def skip_bom(self, got: int) -> int:
        """Drops a UTF-8 byte order mark at the start of the first read; its length or 0."""
        if self.buf.startswith(b"\xef\xbb\xbf", self.end, self.end + got):
            self.begin, self.end = self.begin + 3, self.end + 3
            return 3
        return 0

    def took(self, got: int, partition: str, line: int) -> None:
        """``got`` bytes were read after ``end`` (the buffer starts at line ``line``): their
        line breaks are counted, and a line longer than the limit is SourceRowTooLong."""
        buf, end = self.buf, self.end
        first = buf.find(b"\n", end, end + got)
        if self.partial + (got if first < 0 else first - end) > self.limit:
            raise row_too_long(partition, line + self.have, self.limit)
        if first < 0:
            self.partial += got
        else:
            self.have += buf.count(b"\n", first, end + got)
            self.partial = end + got - buf.rfind(b"\n", first, end + got) - 1
        self.end += got

    def head(self) -> bytes | None:
        """The first line and the blank lines before it, taken off the front (a copy); None
        while that line is not complete."""
        head = bytes(self.view[self.begin : self.end])
        at = head.find(b"\n", len(head) - len(head.lstrip(b"\r\n")))
        if at < 0:
            return None
        self.begin += at + 1
        self.have -= head.count(b"\n", 0, at + 1)
        return head[: at + 1]

    def block(self, count: int, line: int, quote: bytes | None, *, to_end: bool = False) -> Block:
        """The next ``count`` lines (``to_end``: all that is left, ``count`` line breaks),
        from line ``line``, as a block viewing the buffer."""
        if to_end:
            cut = self.end
        else:
            cut = nth_newline(self.buf, count, self.have, self.begin, self.end) + 1
        block = _row_block(self.buf, self.view, self.begin, cut, line, count, quote)
        self.begin, self.have = cut, self.have - count
        return block


def _row_block(
    buf: bytearray,
    view: memoryview,
    begin: int,
    end: int,
    line: int,
    newlines: int,
    quote: bytes | None,
) -> Block:
    """``buf[begin:end]`` as a block (a view), with what the CSV reader checks about it."""
    quoted = quote is not None and buf.find(quote, begin, end) >= 0
    lone_cr = buf.find(b"\r", begin, end) >= 0 and buf.count(b"\r", begin, end) != buf.count(
        b"\r\n", begin, end
    )
    return Block(view[begin:end], line, newlines, quoted, lone_cr)


def row_too_long(partition: str, line: int, max_row_bytes: int) -> SourceRowTooLong:
    return SourceRowTooLong(
        f"{partition}: line {line} is longer than max_row_bytes ({max_row_bytes})",
        path=partition,
        line=line,
        fixes=(
            "raise options.csv.max_row_bytes if the row is real; a file without "
            "line breaks is not CSV or JSON Lines",
        ),
    )


def nth_newline(data: bytes | bytearray, n: int, total: int, lo: int = 0, hi: int = -1) -> int:
    """The index of the ``n``-th line break (1-based) of ``data[lo:hi]``, which holds
    ``total`` >= n: from where the average line length points, one step per line it is off."""
    hi = len(data) if hi < 0 else hi
    guess = lo + (hi - lo) * n // total
    # Count the shorter side of the guess: a chunk's cut is near the end of what was read,
    # so this counts the few lines past it, not the chunk's again.
    if guess - lo <= hi - guess:
        seen = data.count(b"\n", lo, guess)
    else:
        seen = total - data.count(b"\n", guess, hi)
    if seen < n:
        at = guess - 1
        for _ in range(n - seen):
            at = data.find(b"\n", at + 1, hi)
        return at
    at = guess
    for _ in range(seen - n + 1):
        at = data.rfind(b"\n", lo, at)
    return at


def parts(block: Block, size: int) -> Iterator[Block]:
    """``block`` in parts of whole lines of about ``size`` bytes."""
    data, line, start = block.raw, block.line, 0
    while start < len(data):
        end = data.find(b"\n", start + size)
        end = len(data) if end < 0 else end + 1
        part = data[start:end]
        yield Block(part, line)
        line += part.count(b"\n")
        start = end
