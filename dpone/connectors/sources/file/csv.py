"""CSV: blocks parsed by Arrow whole, and the salvage of a block that fails, line by line."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dpone.connectors.base import DecodeFailure
from dpone.connectors.errors import SourceDecodeError, SourceTooManyColumns
from dpone.connectors.sources.file.blocks import MAX_FAILURE_TEXT, Block, parts
from dpone.connectors.sources.file.quotes import Records
from dpone.manifest.specs import CsvOptions

#: A block that fails to parse is parsed again in parts of this size, and only a part that
#: fails is looked at line by line.
SALVAGE_BYTES = 1 << 20


class _Unparsable(Exception):
    """A block Arrow parsed into something other than its lines (a quote swallowed lines)."""


class CsvReader:
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
        #: Where records end under the quoting rules (None: no quoting, a line is a row).
        self.records = (
            None if opts.quote_char is None else Records(opts.delimiter, opts.quote_char.encode())
        )
        self.parse_options = pacsv.ParseOptions(
            delimiter=opts.delimiter,
            quote_char=opts.quote_char if opts.quote_char is not None else False,
            newlines_in_values=opts.newlines_in_values,
        )

    def parse(self, block: Block) -> Iterator[pa.RecordBatch]:
        if block.open_quote:
            if self.names is None:
                if self.opts.header:
                    raise self._not_a_header(block.line)
                self._header(block)  # the line's fields name the columns f0, f1, ...
            body = block.raw.removesuffix(b"\n").removesuffix(b"\r")
            what = "a quoted value opened on this line is not closed within max_row_bytes "
            self._fail(block.line, what + "or before the end of the file", body)
            return
        if block.tentative is not None and self.names is None:
            block.tentative.refused = True  # the header's block: cut where Records says
            return
        if self.names is None:
            block = self._header(block)
            if not block.data:
                return
        if block.tentative is not None:
            table = self._checked(block)
            if table is not None:
                yield from table.to_batches()
            return
        yield from self._parse_or_salvage(block)

    def _checked(self, block: Block) -> pa.Table | None:
        """A tentative block parsed, or None (refused) unless each of its lines is one row:
        then no value holds a line break, and the block's last line break ends a record. The
        last row is looked at too: a quoted value opened on the last line and not closed runs
        to the end of the bytes (Arrow takes it whole), taking that line break with it."""
        assert block.tentative is not None
        try:
            table = self._parse(block.data, block.newlines, block.quoted, block.lone_cr)
        except (pa.ArrowInvalid, _Unparsable):
            table = None
        if (
            table is None
            or not _one_row_per_line(table.num_rows, block.data, block.newlines, block.lone_cr)
            or _breaks_a_line(table.slice(table.num_rows - 1))
        ):
            block.tentative.refused = True
            return None
        return table

    def _parse_or_salvage(self, block: Block, *, whole: bool = True) -> Iterator[pa.RecordBatch]:
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
                for part in parts(block, SALVAGE_BYTES):
                    yield from self._parse_or_salvage(part, whole=False)
            else:
                yield from self._salvage(block)
            return
        yield from table.to_batches()

    def _header(self, block: Block) -> Block:
        whole = block.raw
        data = whole.lstrip(b"\r\n")  # Arrow skips blank lines before the header too
        blank = whole[: len(whole) - len(data)].count(b"\n")
        newlines = block.newlines - blank if block.newlines >= 0 else -1
        line = block.line + blank
        block = Block(data, line, newlines)
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
            raise self._not_a_header(line) from None
        self.names = list(table.schema.names)
        if self.opts.header:
            if end < 0:
                return Block(b"", block.line + 1, 0)
            return Block(block.data[end + 1 :], block.line + 1, max(newlines - 1, -1))
        return block

    def _not_a_header(self, line: int) -> SourceDecodeError:
        return SourceDecodeError(
            f"{self.partition}: line {line} is not a CSV header row",
            path=self.partition,
            line=line,
            fixes=("fix the header line (one name per column, valid text)",),
        )

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

    def _salvage(self, block: Block) -> Iterator[pa.RecordBatch]:
        """The good rows of a block that failed, every bad one a DecodeFailure of its first
        line (a row is a line, or with ``newlines_in_values`` a record of lines)."""
        data = block.raw
        rows: list[tuple[int, bytes]] = []
        if self.records is not None and self.opts.newlines_in_values:
            for offset, record in self.records.split(data):
                body = record.removesuffix(b"\r")
                if body.strip(b"\r\n"):
                    rows.append((block.line + offset, body))
        else:
            for i, raw in enumerate(data.split(b"\n")):
                body = raw.removesuffix(b"\r")
                if not body:
                    continue
                if self.records is not None and not self.records.closed(body):
                    self._fail(block.line + i, "a quoted value is not closed on its line", body)
                else:
                    rows.append((block.line + i, body))
        for table in self._bisect(rows):
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


def _breaks_a_line(row: pa.Table) -> bool:
    """Whether a text value of ``row`` holds a line break."""
    return any(
        isinstance(value, str) and ("\n" in value or "\r" in value)
        for column in row.columns
        if pa.types.is_string(column.type)
        for value in column.to_pylist()
    )


def _csv_problem(body: bytes, columns: int) -> str:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "the line is not valid text in the file's encoding"
    return f"the line does not parse as a row of {columns} fields"
