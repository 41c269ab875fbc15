"""File sources: a glob of CSV, JSONL or Parquet files, read in sorted order, chunk by chunk.

Size (over 500 lines): the CSV, JSONL and Parquet readers share the block reader, the row
provenance and the decode-failure path.

Memory is bounded by the chunk: CSV and JSONL are read in blocks of whole lines, Parquet one
row group's batches at a time. Each file's SHA-256 is computed before the file is read, so a
``record_ref`` can later refuse a file that changed. A line that does not decode (a CSV row
with the wrong field count, an unterminated quote, invalid text; a JSONL line that is not a
JSON object) does not stop the read: it comes out as a :class:`DecodeFailure` of its chunk
and the lifecycle quarantines it or fails the run. Only the block that failed to parse is
looked at line by line; clean blocks go through Arrow whole.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dpone import sourcepaths
from dpone.connectors._util import rechunk
from dpone.connectors.base import DecodeFailure, SourceChunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceDecodeError,
    SourceRowTooLong,
    SourceTooManyColumns,
    SourceUnavailable,
)
from dpone.connectors.fs import SourceFile, open_inputs
from dpone.connectors.presence import (
    absent_keys,
    keyless,
    rows_batch,
    split_presence,
    with_presence,
)
from dpone.connectors.progress import ReadProgress
from dpone.manifest.specs import CsvOptions, FileFormat, FileSourceSpec

#: Bytes read at a time; a block is cut after its last complete line and parsed by Arrow whole.
DEFAULT_BLOCK_SIZE = 1 << 20
#: Arrow parses a chunk's block in blocks of this many reads' bytes (4 MiB by default).
PARSE_READS = 4
#: A block that fails to parse is parsed again in parts of this size, and only a part that
#: fails is looked at line by line.
SALVAGE_BYTES = 1 << 20
#: The longest JSONL line a reader grows its block to (a CSV row's is ``csv.max_row_bytes``).
MAX_JSONL_LINE = 64 << 20
#: How much of an undecodable line a DecodeFailure keeps (for ``pii_policy: preserve``).
MAX_FAILURE_TEXT = 16 << 10


def _codec(name: str) -> str:
    try:
        "".encode(name)
    except LookupError:
        raise SourceConfigError(f"encoding {name!r} is not a known codec") from None
    return name


class FileSource:
    """Files matching ``pattern`` (a :mod:`dpone.sourcepaths` path), in sorted order.

    Listing and opening go through :mod:`dpone.connectors.fs`: local files, or objects of
    ``s3://``, ``gs://``, ``az://`` configured by the spec's ``storage``, whose ``${ENV}``
    references resolve in ``env`` (default: the process environment).

    ``read_all_as_text`` applies to CSV and JSONL: every column arrives as ``string`` (JSON
    numbers keep their exact text, nested values become JSON text, booleans ``true``/``false``)
    and the contract engine parses. Parquet always keeps its own types.
    """

    cursor_pushdown = False
    # Pure pyarrow reading and hashing, nothing bound to a thread: the lifecycle may read
    # the next chunk on a thread of its own (dpone/runtime/prefetch.py).
    read_ahead = True

    def __init__(
        self,
        spec: FileSourceSpec,
        *,
        read_all_as_text: bool,
        block_size: int = DEFAULT_BLOCK_SIZE,
        env: Mapping[str, str] | None = None,
    ) -> None:
        # The compiler refused these already; a spec built by hand gets the same answer.
        problem = sourcepaths.source_path_problem(spec.path)
        if problem is not None:
            raise SourceConfigError(f"source path {problem}", pointer="/source/path")
        self.base_dir = spec.base_dir
        self.pattern = sourcepaths.normalize(spec.path)
        self.format: FileFormat = spec.format
        self.csv = spec.csv
        _codec(spec.csv.encoding)
        self.read_all_as_text = read_all_as_text
        self.block_size = block_size
        self.jsonl_encoding = _codec(spec.jsonl.encoding)
        self.max_columns = spec.max_columns
        self.identity = f"file:{spec.format}:{self.pattern}"
        self.progress = ReadProgress()
        self.inputs = open_inputs(
            self.pattern, self.base_dir, spec.storage, os.environ if env is None else env
        )

    def files(self) -> list[tuple[str, SourceFile]]:
        """(partition, file) of every matching regular file or object, sorted by partition
        (the file's path as the pattern spells it)."""
        return self.inputs.files()

    def matches(self, partition: str) -> bool:
        """Whether ``partition`` (a file as a record_ref spells it) is one this source reads."""
        return self.inputs.matches(partition)

    def resolve(self, partition: str) -> SourceFile:
        """The file ``partition`` names, resolved the way :meth:`files` resolves the glob."""
        return self.inputs.resolve(partition)

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Chunks of every file in order; ``after`` is ignored (the lifecycle filters)."""
        del after
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        files = self.files()
        self.progress.start(path for _, path in files)
        for partition, path in files:
            yield from self.read_file(partition, path, chunk_size)

    def read_progress(self) -> tuple[int, int | None]:
        """Bytes read so far and the files' total size (``connectors/progress.py``)."""
        return self.progress.snapshot()

    def read_file(self, partition: str, path: SourceFile, chunk_size: int) -> Iterator[SourceChunk]:
        """One file's chunks (used by the replay resolver to re-read a single partition)."""
        self.progress.begin_file(path, by_block=self.format != "parquet")
        try:
            digest = path.sha256()
        except OSError as exc:
            raise SourceUnavailable(
                f"{partition}: cannot read the file ({type(exc).__name__})"
            ) from None
        failures: list[DecodeFailure] = []
        header: list[str] = []
        row = 1
        batches = self._batches(partition, path, chunk_size, failures, header)
        for batch in rechunk(batches, chunk_size):
            batch, present = split_presence(batch)
            yield SourceChunk(batch, partition, digest, row, True, _in_order(failures), present)
            failures.clear()
            row += batch.num_rows
        path.verify(digest)
        if row == 1 and header and not failures:
            # A CSV file of a header and no row: its columns, as text (what inference makes
            # of an empty sample), so a run of such files still makes their table.
            columns = pa.schema([pa.field(name, pa.string()) for name in header])
            yield SourceChunk(
                pa.RecordBatch.from_pylist([], schema=columns), partition, digest, 1, True
            )
        if failures:
            empty = pa.RecordBatch.from_pydict({})
            yield SourceChunk(empty, partition, digest, row, True, _in_order(failures))
        self.progress.end_file()

    def _batches(
        self,
        partition: str,
        path: SourceFile,
        chunk_size: int,
        failures: list[DecodeFailure],
        header: list[str],
    ) -> Iterator[pa.RecordBatch]:
        """Decoded batches of one file; lines that do not decode go to ``failures``, a CSV
        header's names to ``header``."""
        try:
            if self.format == "csv":
                reader = _CsvReader(
                    self.csv,
                    self.read_all_as_text,
                    partition,
                    failures,
                    parse_bytes=PARSE_READS * self.block_size,
                    max_columns=self.max_columns,
                )
                blocks: Iterator[_Block]
                if self.csv.newlines_in_values:
                    blocks = _line_blocks(
                        path,
                        partition,
                        self.csv.encoding,
                        self.block_size,
                        self.csv.max_row_bytes,
                        reader.quote,
                    )
                else:
                    # A line is a row: blocks of a chunk's lines parse into the chunk itself,
                    # which then goes on without being cut and copied together again.
                    blocks = _row_blocks(
                        path,
                        partition,
                        self.csv.encoding,
                        self.block_size,
                        self.csv.max_row_bytes,
                        lines=chunk_size,
                        first_extra=int(self.csv.header),
                        quote=reader.quote,
                    )
                for block in self.progress.blocks(blocks):
                    yield from reader.parse(block)
                if self.csv.header and reader.names is not None:
                    header.extend(reader.names)
            elif self.format == "jsonl":
                yield from _jsonl_batches(
                    self.progress.blocks(
                        _line_blocks(
                            path, partition, self.jsonl_encoding, self.block_size, MAX_JSONL_LINE
                        )
                    ),
                    chunk_size,
                    self.read_all_as_text,
                    failures,
                    max_columns=self.max_columns,
                )
            else:
                yield from _parquet_batches(path, partition, chunk_size)
        except OSError as exc:
            raise _read_error(exc, partition) from None


def _in_order(failures: list[DecodeFailure]) -> tuple[DecodeFailure, ...]:
    return tuple(sorted(failures, key=lambda failure: failure.line))


def _read_error(exc: OSError, partition: str) -> Exception:
    """An OS error (it has an errno: a disk, a network share) may pass on retry; an Arrow
    error without one is the file's content (a corrupt gzip stream, a Parquet page)."""
    if exc.errno is not None:
        return SourceUnavailable(f"{partition}: reading the file failed ({type(exc).__name__})")
    return SourceDecodeError(
        f"{partition}: the file is corrupt (its compression or format does not decode)",
        path=partition,
        fixes=("replace the file with an intact copy; retrying reads the same bytes",),
    )


# --- blocks of whole lines ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Block:
    """Whole lines of a file as UTF-8 bytes (invalid bytes kept as they are), from ``line``;
    ``newlines`` counts its line breaks when known (-1: not counted)."""

    data: bytes | memoryview
    line: int
    newlines: int = -1
    #: For a view (see _row_blocks), what the CSV reader would look for in its bytes: whether
    #: it holds a quote character, and a \r that is not part of a \r\n.
    quoted: bool | None = None
    lone_cr: bool | None = None

    @property
    def raw(self) -> bytes:
        """The block's bytes (a copy of a view)."""
        return self.data if isinstance(self.data, bytes) else bytes(self.data)

    def as_bytes(self) -> _Block:
        """The same block holding bytes (a view is valid only until the next block)."""
        if isinstance(self.data, bytes):
            return self
        return _Block(bytes(self.data), self.line, self.newlines)


def _line_blocks(
    path: SourceFile,
    partition: str,
    encoding: str,
    block_size: int,
    max_row_bytes: int,
    quote: bytes | None = None,
) -> Iterator[_Block]:
    """The file (decompressed by extension: .gz, .bz2, .zst, ...) in blocks that end at a
    newline; a line longer than ``max_row_bytes`` is :class:`SourceRowTooLong`.

    With ``quote`` (CSV with ``newlines_in_values``) a block ends only at a newline after an
    even number of quote characters, so a quoted value spanning lines stays in one block.
    """
    utf8 = codecs.lookup(encoding).name == "utf-8"
    decoder = None if utf8 else codecs.getincrementaldecoder(encoding)("surrogateescape")
    line = 1
    pending = b""
    # Reads no longer than the limit: a line past it then always spans two reads, where the
    # check below sees it.
    read_size = min(block_size, max_row_bytes)
    with path.open_stream() as stream:
        while True:
            data = stream.read(read_size)
            eof = not data
            if decoder is not None:
                # Bytes that do not decode survive as themselves and fail Arrow's UTF-8
                # check, which pins them to their line.
                data = decoder.decode(data, final=eof).encode("utf-8", "surrogateescape")
            if line == 1 and not pending:
                data = data.removeprefix(b"\xef\xbb\xbf")
            buf = pending + data if pending else data
            cut = _cut(buf, quote)
            if (cut < 0 and len(buf) > max_row_bytes) or buf.find(b"\n") > max_row_bytes:
                raise _row_too_long(partition, line, max_row_bytes)
            if eof:
                if buf:
                    yield _Block(buf, line, buf.count(b"\n"))
                return
            if cut < 0:
                pending = buf
                continue
            block, pending = buf[: cut + 1], buf[cut + 1 :]
            newlines = block.count(b"\n")
            yield _Block(block, line, newlines)
            line += newlines


def _row_blocks(
    path: SourceFile,
    partition: str,
    encoding: str,
    block_size: int,
    max_row_bytes: int,
    *,
    lines: int,
    first_extra: int,
    quote: bytes | None,
) -> Iterator[_Block]:
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
                        yield _Block(head, line, count)
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
            raise _row_too_long(partition, line + self.have, self.limit)
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

    def block(self, count: int, line: int, quote: bytes | None, *, to_end: bool = False) -> _Block:
        """The next ``count`` lines (``to_end``: all that is left, ``count`` line breaks),
        from line ``line``, as a block viewing the buffer."""
        if to_end:
            cut = self.end
        else:
            cut = _nth_newline(self.buf, count, self.have, self.begin, self.end) + 1
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
) -> _Block:
    """``buf[begin:end]`` as a block (a view), with what the CSV reader checks about it."""
    quoted = quote is not None and buf.find(quote, begin, end) >= 0
    lone_cr = buf.find(b"\r", begin, end) >= 0 and buf.count(b"\r", begin, end) != buf.count(
        b"\r\n", begin, end
    )
    return _Block(view[begin:end], line, newlines, quoted, lone_cr)


def _row_too_long(partition: str, line: int, max_row_bytes: int) -> SourceRowTooLong:
    return SourceRowTooLong(
        f"{partition}: line {line} is longer than max_row_bytes ({max_row_bytes})",
        path=partition,
        line=line,
        fixes=(
            "raise options.csv.max_row_bytes if the row is real; a file without "
            "line breaks is not CSV or JSON Lines",
        ),
    )


def _nth_newline(data: bytes | bytearray, n: int, total: int, lo: int = 0, hi: int = -1) -> int:
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


def _parts(block: _Block, size: int) -> Iterator[_Block]:
    """``block`` in parts of whole lines of about ``size`` bytes."""
    data, line, start = block.raw, block.line, 0
    while start < len(data):
        end = data.find(b"\n", start + size)
        end = len(data) if end < 0 else end + 1
        part = data[start:end]
        yield _Block(part, line)
        line += part.count(b"\n")
        start = end


def _cut(buf: bytes, quote: bytes | None) -> int:
    """The index of the newline that ends the last complete record of ``buf``, or -1."""
    cut = buf.rfind(b"\n")
    if quote is not None:
        while cut >= 0 and buf.count(quote, 0, cut) % 2:
            cut = buf.rfind(b"\n", 0, cut)
    return cut


# --- CSV ------------------------------------------------------------------------------------------


class _Unparsable(Exception):
    """A block Arrow parsed into something other than its lines (a quote swallowed lines)."""


class _CsvReader:
    """Parses blocks of whole lines; a block that fails is split until each bad line is found.

    A block is handed to ``read_csv`` with the column names of the header. A chunk's block
    (a line is a row) is read by Arrow in blocks of ``parse_bytes`` (a few MiB stay in the
    CPU's caches; a chunk's 20 MiB at once do not); a row longer than that fails Arrow's
    block, and the 1 MiB parts the block is parsed again in are each handed over whole (so
    a row as long as ``max_row_bytes`` parses). A quote opened
    and never closed on a line would make Arrow swallow the following lines into one value
    even with ``newlines_in_values`` off, so a block holding a quote character is checked for
    values with a line break, and such a block is salvaged line by line.
    """

    def __init__(
        self,
        opts: CsvOptions,
        as_text: bool,
        partition: str,
        failures: list[DecodeFailure],
        parse_bytes: int,
        max_columns: int = 10_000,
    ) -> None:
        self.opts = opts
        self.max_columns = max_columns
        self.parse_bytes = parse_bytes
        self.as_text = as_text
        self.partition = partition
        self.failures = failures
        self.names: list[str] | None = None
        self.quote = None if opts.quote_char is None else opts.quote_char.encode()
        self.parse_options = pacsv.ParseOptions(
            delimiter=opts.delimiter,
            quote_char=opts.quote_char if opts.quote_char is not None else False,
            newlines_in_values=opts.newlines_in_values,
        )

    def parse(self, block: _Block) -> Iterator[pa.RecordBatch]:
        if self.names is None:
            block = self._header(block)
            if not block.data:
                return
        yield from self._parse_or_salvage(block)

    def _parse_or_salvage(self, block: _Block, *, whole: bool = True) -> Iterator[pa.RecordBatch]:
        """``block`` parsed; if it fails, each bad line is found. ``whole``: a block as read
        (not a part of one that failed), which Arrow parses in blocks of ``parse_bytes``."""
        by_parts = whole and not self.opts.newlines_in_values
        try:
            table = self._parse(
                block.data,
                block.newlines,
                block.quoted,
                block.lone_cr,
                arrow_block=self.parse_bytes if by_parts else None,
            )
        except (pa.ArrowInvalid, _Unparsable):
            block = block.as_bytes()
            if by_parts and len(block.data) > SALVAGE_BYTES:
                # A chunk-sized block: only its parts that fail are looked at line by line
                # (a row longer than ``parse_bytes`` fails Arrow's block too, and parses
                # here in a part parsed whole).
                for part in _parts(block, SALVAGE_BYTES):
                    yield from self._parse_or_salvage(part, whole=False)
            else:
                yield from self._salvage(block)
            return
        yield from table.to_batches()

    def _header(self, block: _Block) -> _Block:
        whole = block.raw
        data = whole.lstrip(b"\r\n")  # Arrow skips blank lines before the header too
        blank = whole[: len(whole) - len(data)].count(b"\n")
        newlines = block.newlines - blank if block.newlines >= 0 else -1
        line = block.line + blank
        block = _Block(data, line, newlines)
        end = data.find(b"\n")
        first = data if end < 0 else data[: end + 1]
        self._refuse_wide(bytes(first), line)
        try:
            if self.opts.header:
                # Column names are text: Arrow would hand back bytes that are not UTF-8 as an
                # unexpected UnicodeDecodeError from Schema.names (a transcoded file's bytes
                # that do not decode survive into here as themselves).
                bytes(first).decode("utf-8")
            table = pacsv.read_csv(
                io.BytesIO(first),
                read_options=pacsv.ReadOptions(
                    autogenerate_column_names=not self.opts.header, use_threads=False
                ),
                parse_options=self.parse_options,
            )
        except (pa.ArrowInvalid, UnicodeDecodeError):
            raise SourceDecodeError(
                f"{self.partition}: line {line} is not a CSV header row",
                path=self.partition,
                line=line,
                fixes=("fix the header line (one name per column, valid text)",),
            ) from None
        self.names = list(table.schema.names)
        if self.opts.header:
            if end < 0:
                return _Block(b"", block.line + 1, 0)
            return _Block(block.data[end + 1 :], block.line + 1, max(newlines - 1, -1))
        return block

    def _refuse_wide(self, first: bytes, line: int) -> None:
        """A first line of more than ``max_columns`` fields is refused before Arrow parses
        it (100,000 columns took Arrow seconds, and every later step more). Counting the
        delimiters bounds the fields from above; only a line over the cap is split exactly
        (a quoted value may hold a delimiter)."""
        opts = self.opts
        if first.count(opts.delimiter.encode()) < self.max_columns:
            return
        text = first.decode("utf-8", "replace").rstrip("\r\n")
        try:
            if opts.quote_char is None:
                reader = csv.reader([text], delimiter=opts.delimiter, quoting=csv.QUOTE_NONE)
            else:
                reader = csv.reader([text], delimiter=opts.delimiter, quotechar=opts.quote_char)
            count = len(next(reader))
        except csv.Error:
            count = self.max_columns + 1  # not even one CSV row: the bound stands
        if count > self.max_columns:
            where = f"{self.partition}: line {line}"
            raise SourceTooManyColumns.over(where, self.max_columns, path=self.partition)

    def _parse(
        self,
        data: bytes | memoryview,
        newlines: int = -1,
        quoted: bool | None = None,
        lone_cr: bool | None = None,
        arrow_block: int | None = None,
    ) -> pa.Table:
        """``data`` as a table; Arrow reads it in blocks of ``arrow_block`` bytes (default:
        all of it as one block; a row longer than a block fails)."""
        assert self.names is not None
        convert: dict[str, Any] = {}
        if self.as_text:
            convert["column_types"] = dict.fromkeys(self.names, pa.string())
        if self.opts.null_values is not None:
            convert.update(
                null_values=list(self.opts.null_values),
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            )
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(
                column_names=self.names,
                block_size=min(len(data) + 1, arrow_block or len(data) + 1),
                use_threads=False,
            ),
            parse_options=self.parse_options,
            convert_options=pacsv.ConvertOptions(**convert),
        )
        if (
            not self.opts.newlines_in_values
            and self.quote is not None
            and (quoted if quoted is not None else self.quote in data)
            and not _one_row_per_line(table.num_rows, data, newlines, lone_cr)
        ):
            for column in table.columns:
                if (
                    pa.types.is_string(column.type)
                    and pc.any(pc.match_substring(column, "\n")).as_py()
                ):
                    raise _Unparsable()
        return table

    def _salvage(self, block: _Block) -> Iterator[pa.RecordBatch]:
        """The good lines of a block that failed, every bad line a DecodeFailure (with
        ``newlines_in_values`` a row is its lines up to an even number of quotes)."""
        lines: list[tuple[int, bytes]] = []
        record: list[bytes] = []
        for i, raw in enumerate(block.raw.split(b"\n")):
            body = raw.removesuffix(b"\r")
            if record:  # a quoted value spanning lines (newlines_in_values) goes on
                record.append(raw)
                if b"\n".join(record).count(self.quote or b"") % 2 == 0:
                    lines[-1] = (lines[-1][0], b"\n".join(record).removesuffix(b"\r"))
                    record = []
                continue
            if not body:
                continue
            if self.quote is not None and _unterminated(body, self.opts.delimiter, self.quote):
                if self.opts.newlines_in_values:
                    record = [raw]
                    lines.append((block.line + i, body))
                    continue
                self._fail(block.line + i, "a quoted value is not closed on its line", body)
            else:
                lines.append((block.line + i, body))
        for table in self._bisect(lines):
            yield from table.to_batches()

    def _bisect(self, lines: list[tuple[int, bytes]]) -> Iterator[pa.Table]:
        if not lines:
            return
        try:
            yield self._parse(b"\n".join(body for _, body in lines) + b"\n")
            return
        except (pa.ArrowInvalid, _Unparsable):
            pass
        if len(lines) == 1:
            line, body = lines[0]
            self._fail(line, _csv_problem(body, len(self.names or ())), body)
            return
        middle = len(lines) // 2
        yield from self._bisect(lines[:middle])
        yield from self._bisect(lines[middle:])

    def _fail(self, line: int, what: str, data: bytes) -> None:
        text = data[:MAX_FAILURE_TEXT].decode("utf-8", "replace")
        self.failures.append(DecodeFailure(line, what, text))


def _one_row_per_line(
    rows: int, data: bytes | memoryview, newlines: int = -1, lone_cr: bool | None = None
) -> bool:
    """Whether Arrow made exactly one row of each line of ``data``: then no value holds a line
    break (a row spans at least one line, a blank line makes none, and a value with a line
    break spans two), which spares looking for one in every value. Lines end with ``\\n``
    (or ``\\r\\n``); a lone ``\\r``, which Arrow also takes for a line end, says nothing."""
    if newlines < 0 or lone_cr is None:
        assert isinstance(data, bytes)
        newlines = data.count(b"\n")
        lone_cr = b"\r" in data and data.count(b"\r") != data.count(b"\r\n")
    lines = newlines + (not data or data[-1] != 0x0A)
    return rows == lines and not lone_cr


def _unterminated(body: bytes, delimiter: str, quote: bytes) -> bool:
    """Whether a quoted field of this line is still open at its end (Arrow's rules: a quote
    opens a field only at its start, a doubled quote inside it is a literal quote)."""
    if body.count(quote) % 2 == 0:
        return False
    delim, q = delimiter.encode()[0], quote[0]
    inside = False
    at_start = True
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if inside:
            if c == q:
                if i + 1 < n and body[i + 1] == q:
                    i += 1
                else:
                    inside = False
        elif c == delim:
            at_start = True
            i += 1
            continue
        elif c == q and at_start:
            inside = True
        at_start = False
        i += 1
    return inside


def _csv_problem(body: bytes, columns: int) -> str:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "the line is not valid text in the file's encoding"
    return f"the line does not parse as a row of {columns} fields"


# --- JSONL ----------------------------------------------------------------------------------------
# pyarrow.json.read_json reads a whole file and fails when a field changes type between rows,
# so JSONL is read ``chunk_size`` lines at a time: typed mode hands each group of lines to
# Arrow's JSON parser; text mode parses lines with the json module, keeping numbers' exact text.


class _RawNumber(str):
    """A JSON number (or NaN/Infinity) kept as its source text."""

    __slots__ = ()


def _jsonl_batches(
    blocks: Iterator[_Block],
    chunk_size: int,
    as_text: bool,
    failures: list[DecodeFailure],
    *,
    max_columns: int = 10_000,
) -> Iterator[pa.RecordBatch]:
    """Batches of up to ``chunk_size`` JSON objects; a line that is not one (invalid text or
    JSON, another JSON value, nesting deeper than the parser goes) becomes a DecodeFailure.
    More than ``max_columns`` keys in the objects of a batch is :class:`SourceTooManyColumns`."""
    objects: list[dict[str, Any]] = []
    keys: set[str] = set()
    for block in blocks:
        for i, raw in enumerate(block.raw.split(b"\n")):
            body = raw.removesuffix(b"\r")
            if not body.strip():
                continue
            obj, what = _json_object(body, as_text)
            if obj is None:
                text = body[:MAX_FAILURE_TEXT].decode("utf-8", "replace")
                failures.append(DecodeFailure(block.line + i, what, text))
                continue
            objects.append(obj)
            keys.update(obj)  # the batch's columns: the union of its objects' keys
            if len(keys) > max_columns:
                where = f"the JSON objects up to line {block.line + i}"
                raise SourceTooManyColumns.over(where, max_columns)
            if len(objects) == chunk_size:
                yield _jsonl_batch(objects, as_text)
                objects = []
                keys = set()
    if objects:
        yield _jsonl_batch(objects, as_text)


def _json_object(body: bytes, as_text: bool) -> tuple[dict[str, Any] | None, str]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the line is not valid text in the file's encoding"
    try:
        if as_text:
            obj = json.loads(
                text, parse_float=_RawNumber, parse_int=_RawNumber, parse_constant=_RawNumber
            )
        else:
            obj = json.loads(text)
        if not isinstance(obj, dict):
            return None, "the line is not a JSON object"
        if _SURROGATE_ESCAPE.search(body) and not _valid_unicode(obj):
            return None, "the line holds a JSON string that is not valid Unicode (a lone surrogate)"
        if as_text:
            # Nested values become JSON text here, where a too-deep one is still this line's.
            obj = {key: _as_text(value) for key, value in obj.items()}
    except RecursionError:
        return None, "the line nests JSON values deeper than the reader allows"
    except ValueError:
        return None, "the line is not valid JSON"
    return obj, ""


#: ``\uD800``..``\uDFFF``: the only way a JSON line that is valid UTF-8 yields a string that
#: is not (a lone surrogate, which no encoder and no sink accepts). Pairs match too; the
#: check below tells them apart, on such lines only.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _valid_unicode(obj: dict[str, Any]) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _jsonl_batch(objects: list[dict[str, Any]], as_text: bool) -> pa.RecordBatch:
    """Lines as a batch; a key absent from some lines gets a presence column (see
    ``connectors/presence.py``)."""
    if not as_text:
        try:
            return rows_batch(objects)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise SourceDecodeError(
                "JSON values change type between rows (read them as text to let the contract "
                "decide)"
            ) from None
    if not any(objects):
        return keyless(len(objects))
    columns: dict[str, list[str | None]] = {}
    for offset, obj in enumerate(objects):
        for key, value in obj.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [None] * offset
            column.append(value)
        for column in columns.values():
            if len(column) <= offset:
                column.append(None)
    batch = pa.RecordBatch.from_pydict(
        {name: pa.array(values, pa.string()) for name, values in columns.items()}
    )
    _, absent = absent_keys(objects)
    return with_presence(batch, absent) if absent else batch


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):  # includes _RawNumber
        return str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _json_text(value)


def _json_text(value: Any) -> str:
    if isinstance(value, _RawNumber):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return json.dumps(value)


# --- Parquet --------------------------------------------------------------------------------------


def _parquet_batches(path: SourceFile, partition: str, chunk_size: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq  # only a Parquet source pays for its import

    try:
        # pre_buffer off: on, iter_batches fetches every row group up front (the whole file
        # in memory, one ranged read of an object); off, one row group's pages at a time.
        with path.open_random() as source, pq.ParquetFile(source, pre_buffer=False) as pf:
            yield from pf.iter_batches(batch_size=chunk_size)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SourceDecodeError(
            f"{partition}: not a readable Parquet file",
            path=partition,
            fixes=("replace the file with an intact copy; retrying reads the same bytes",),
        ) from None
