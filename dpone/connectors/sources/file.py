"""File sources: a glob of CSV, JSONL or Parquet files, read in sorted order, chunk by chunk.

Memory is bounded by the chunk: CSV goes through Arrow's streaming reader (``block_size``
bytes at a time), JSONL is read ``chunk_size`` lines at a time, Parquet one row group's
batches at a time. Each file's SHA-256 is computed before the file is read, so a
``record_ref`` can later refuse a file that changed.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from dpone.connectors._util import rechunk, sha256_file
from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceDecodeError,
    SourceNoFiles,
    SourceUnavailable,
)

FileFormat = Literal["csv", "jsonl", "parquet"]
FILE_FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")
# Arrow reads ahead a few dozen blocks: 256 KiB keeps that near 10 MB at full parse speed.
DEFAULT_BLOCK_SIZE = 1 << 18


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """``options.csv`` of the manifest. ``quote_char`` None disables quoting.

    ``null_values`` None keeps every field as text (``""`` stays ``""``; the contract's
    ``empty_string_is_null`` decides); a list turns exactly those unquoted spellings into NULL.
    """

    delimiter: str = ","
    header: bool = True
    encoding: str = "utf-8"
    quote_char: str | None = '"'
    null_values: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> CsvOptions:
        cfg = dict(config or {})
        known = {"delimiter", "header", "encoding", "quote_char", "null_values"}
        unknown = {k for k in cfg if not k.startswith("x-")} - known
        if unknown:
            raise SourceConfigError(f"unknown csv option(s): {', '.join(sorted(unknown))}")
        nulls = cfg.get("null_values")
        quote = cfg.get("quote_char", '"')
        opts = cls(
            delimiter=str(cfg.get("delimiter", ",")),
            header=bool(cfg.get("header", True)),
            encoding=str(cfg.get("encoding", "utf-8")),
            quote_char=None if quote in (None, "", False) else str(quote),
            null_values=None if nulls is None else tuple(str(v) for v in nulls),
        )
        if len(opts.delimiter) != 1 or (opts.quote_char is not None and len(opts.quote_char) != 1):
            raise SourceConfigError("csv delimiter and quote_char must be one character")
        _codec(opts.encoding)
        return opts


def _codec(name: str) -> str:
    try:
        "".encode(name)
    except LookupError:
        raise SourceConfigError(f"encoding {name!r} is not a known codec") from None
    return name


class FileSource:
    """Files matching ``pattern`` (relative to ``base_dir``), in sorted order.

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
        base_dir: Path,
        pattern: str,
        fmt: FileFormat,
        *,
        csv: CsvOptions | None = None,
        read_all_as_text: bool = True,
        block_size: int = DEFAULT_BLOCK_SIZE,
        jsonl_encoding: str = "utf-8",
    ) -> None:
        if fmt not in FILE_FORMATS:
            raise SourceConfigError(f"unknown file format; expected one of {FILE_FORMATS}")
        if not pattern or Path(pattern).is_absolute() or pattern.startswith("~"):
            raise SourceConfigError("source path must be relative to the manifest's folder")
        self.base_dir = Path(base_dir)
        self.pattern = pattern
        self.format: FileFormat = fmt
        self.csv = csv or CsvOptions()
        self.read_all_as_text = read_all_as_text
        self.block_size = block_size
        self.jsonl_encoding = _codec(jsonl_encoding)
        self.identity = f"file:{fmt}:{Path(pattern).as_posix()}"

    def files(self) -> list[tuple[str, Path]]:
        """(partition, path) of every matching regular file, sorted by partition."""
        found: dict[str, Path] = {}
        for path in self.base_dir.glob(self.pattern):
            if path.is_file():
                found[Path(os.path.relpath(path, self.base_dir)).as_posix()] = path
        if not found:
            raise SourceNoFiles(
                f"source path {self.pattern!r} matched no file",
                fixes=("check the glob; it is relative to the manifest's folder",),
            )
        return sorted(found.items())

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Chunks of every file in order; ``after`` is ignored (the lifecycle filters)."""
        del after
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        for partition, path in self.files():
            yield from self.read_file(partition, path, chunk_size)

    def read_file(self, partition: str, path: Path, chunk_size: int) -> Iterator[SourceChunk]:
        """One file's chunks (used by the replay resolver to re-read a single partition)."""
        try:
            digest = sha256_file(path)
        except OSError as exc:
            raise SourceUnavailable(
                f"{partition}: cannot read the file ({type(exc).__name__})"
            ) from None
        row = 1
        for batch in rechunk(self._raw_batches(partition, path, chunk_size), chunk_size):
            yield SourceChunk(batch, partition, digest, row, True)
            row += batch.num_rows

    def _raw_batches(self, partition: str, path: Path, chunk_size: int) -> Iterator[pa.RecordBatch]:
        try:
            if self.format == "csv":
                yield from _csv_batches(
                    path, partition, self.csv, self.read_all_as_text, self.block_size
                )
            elif self.format == "jsonl":
                yield from _jsonl_batches(
                    path, partition, chunk_size, self.read_all_as_text, self.jsonl_encoding
                )
            else:
                yield from _parquet_batches(path, partition, chunk_size)
        except OSError as exc:
            raise SourceUnavailable(
                f"{partition}: reading the file failed ({type(exc).__name__})"
            ) from None


# --- CSV ------------------------------------------------------------------------------------------


def _csv_batches(
    path: Path, partition: str, opts: CsvOptions, as_text: bool, block_size: int
) -> Iterator[pa.RecordBatch]:
    if path.stat().st_size == 0:
        return
    bad_row: dict[str, int] = {}

    def on_invalid_row(row: Any) -> str:
        # Record the shape only: row.text holds values and must not travel anywhere.
        bad_row["expected"] = int(row.expected_columns)
        bad_row["actual"] = int(row.actual_columns)
        return "error"

    read_options = pacsv.ReadOptions(
        block_size=block_size,
        encoding=opts.encoding,
        autogenerate_column_names=not opts.header,
    )
    parse_options = pacsv.ParseOptions(
        delimiter=opts.delimiter,
        quote_char=opts.quote_char if opts.quote_char is not None else False,
        newlines_in_values=opts.quote_char is not None,
        invalid_row_handler=on_invalid_row,
    )
    convert: dict[str, Any] = {}
    if opts.null_values is not None:
        convert.update(
            null_values=list(opts.null_values),
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        )
    rows = 0
    try:
        if as_text:
            # Arrow needs the names to force every column to string; the first block tells.
            with pacsv.open_csv(
                str(path), read_options=read_options, parse_options=parse_options
            ) as probe:
                convert["column_types"] = {name: pa.string() for name in probe.schema.names}
        reader = pacsv.open_csv(
            str(path),
            read_options=read_options,
            parse_options=parse_options,
            convert_options=pacsv.ConvertOptions(**convert),
        )
        with reader:
            for batch in reader:
                yield batch
                rows += batch.num_rows
    except (pa.ArrowInvalid, UnicodeDecodeError):
        if bad_row:
            what = f"a row has {bad_row['actual']} fields, expected {bad_row['expected']}"
        else:
            what = f"a value is not valid {opts.encoding} text or the CSV is malformed"
        raise SourceDecodeError(
            f"{partition}: {what} (in the block after data row {rows})",
            path=partition,
        ) from None


# --- JSONL ----------------------------------------------------------------------------------------
# pyarrow.json.read_json reads a whole file and fails when a field changes type between rows,
# so JSONL is read ``chunk_size`` lines at a time: typed mode hands each group of lines to
# Arrow's JSON parser; text mode parses lines with the json module, keeping numbers' exact text.


class _RawNumber(str):
    """A JSON number (or NaN/Infinity) kept as its source text."""

    __slots__ = ()


def _jsonl_batches(
    path: Path, partition: str, chunk_size: int, as_text: bool, encoding: str
) -> Iterator[pa.RecordBatch]:
    lines: list[str] = []
    first = 1
    row = 0
    try:
        with path.open("r", encoding=encoding, newline="") as fh:
            for line in fh:
                if row == 0 and line.startswith("\ufeff"):
                    line = line[1:]
                if not line.strip():
                    continue
                row += 1
                lines.append(line)
                if len(lines) == chunk_size:
                    yield _jsonl_batch(lines, partition, first, as_text)
                    first, lines = row + 1, []
    except UnicodeDecodeError:
        raise SourceDecodeError(
            f"{partition}: text after row {row} is not valid {encoding}", path=partition
        ) from None
    if lines:
        yield _jsonl_batch(lines, partition, first, as_text)


def _jsonl_batch(lines: list[str], partition: str, first: int, as_text: bool) -> pa.RecordBatch:
    if not as_text:
        data = "".join(line if line.endswith("\n") else line + "\n" for line in lines).encode()
        try:
            table = pajson.read_json(
                io.BytesIO(data),
                read_options=pajson.ReadOptions(block_size=max(len(data), 1 << 16)),
                parse_options=pajson.ParseOptions(unexpected_field_behavior="infer"),
            )
        except pa.ArrowInvalid:
            raise SourceDecodeError(
                f"{partition}: rows {first}..{first + len(lines) - 1} are not JSON objects of "
                "consistent types (read them as text to let the contract decide)",
                path=partition,
            ) from None
        return table.combine_chunks().to_batches()[0]
    columns: dict[str, list[str | None]] = {}
    for offset, line in enumerate(lines):
        try:
            obj = json.loads(
                line, parse_float=_RawNumber, parse_int=_RawNumber, parse_constant=_RawNumber
            )
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise SourceDecodeError(
                f"{partition}: row {first + offset} is not a JSON object", path=partition
            )
        for key, value in obj.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [None] * offset
            column.append(_as_text(value))
        for column in columns.values():
            if len(column) <= offset:
                column.append(None)
    return pa.RecordBatch.from_pydict(
        {name: pa.array(values, pa.string()) for name, values in columns.items()}
    )


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


def _parquet_batches(path: Path, partition: str, chunk_size: int) -> Iterator[pa.RecordBatch]:
    try:
        with pq.ParquetFile(str(path)) as pf:
            yield from pf.iter_batches(batch_size=chunk_size)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SourceDecodeError(
            f"{partition}: not a readable Parquet file", path=partition
        ) from None
