"""The file source: lists the files of a glob, hashes each one and reads it by its format."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping

import pyarrow as pa

from dpone import sourcepaths
from dpone.connectors.base import DecodeFailure, Partitioning, SourceChunk
from dpone.connectors.batches import rechunk
from dpone.connectors.errors import SourceConfigError, SourceDecodeError, SourceUnavailable
from dpone.connectors.fs import HashStopped, LocalFile, SourceFile, open_inputs
from dpone.connectors.presence import split_presence
from dpone.connectors.progress import ReadProgress
from dpone.connectors.sources.file.blocks import Block, line_blocks, record_blocks, row_blocks
from dpone.connectors.sources.file.csv import CsvReader
from dpone.manifest.specs import FileFormat, FileSourceSpec

#: Bytes read at a time; a block is cut after its last complete line and parsed by Arrow whole.
DEFAULT_BLOCK_SIZE = 1 << 20
#: Arrow parses a chunk's block in blocks of this many reads' bytes (4 MiB by default).
PARSE_READS = 4


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
        self._stop = threading.Event()  # set by stop_reading; read by the hashing threads
        self.inputs = open_inputs(
            self.pattern, self.base_dir, spec.storage, os.environ if env is None else env
        )

    def stop_reading(self) -> None:
        """Stop hashing the local file being read (from any thread): a reader waiting for
        the hash before its first chunk then ends, with :class:`SourceUnavailable`, instead
        of hashing the rest of the file. For a run ending before it reads its chunks; the
        source reads nothing more afterwards."""
        self._stop.set()

    def files(self) -> list[tuple[str, SourceFile]]:
        """(partition, file) of every matching regular file or object, sorted by partition
        (the file's path as the pattern spells it)."""
        return self.inputs.files()

    def partitions(self, chunk_size: int, after: object | None = None) -> Partitioning:
        """A partition per file; a Parquet file's row groups grouped (scale-out, SPEC §12)."""
        from dpone.connectors.sources.file.partitions import file_partitions

        return file_partitions(self.files(), self.format == "parquet", chunk_size)

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
        hashing = _Digest(path, partition, self._stop)
        failures: list[DecodeFailure] = []
        header: list[str] = []
        row = 1
        batches = self._batches(partition, path, chunk_size, failures, header)
        for batch in rechunk(batches, chunk_size):
            digest = hashing.result()  # before the first chunk: its refs name the file's hash
            batch, present = split_presence(batch)
            yield SourceChunk(batch, partition, digest, row, True, _in_order(failures), present)
            failures.clear()
            row += batch.num_rows
        digest = hashing.result()
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
                reader = CsvReader(
                    self.csv,
                    self.read_all_as_text,
                    partition,
                    failures,
                    parse_bytes=PARSE_READS * self.block_size,
                    max_columns=self.max_columns,
                )
                blocks: Iterator[Block]
                if self.csv.newlines_in_values and reader.records is not None:
                    blocks = record_blocks(
                        path,
                        partition,
                        self.csv.encoding,
                        self.block_size,
                        self.csv.max_row_bytes,
                        reader.records,
                    )
                elif self.csv.newlines_in_values:  # no quoting: a line is a row
                    blocks = line_blocks(
                        path, partition, self.csv.encoding, self.block_size, self.csv.max_row_bytes
                    )
                else:
                    # A line is a row: blocks of a chunk's lines parse into the chunk itself,
                    # which then goes on without being cut and copied together again.
                    blocks = row_blocks(
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
                # Each format's reader is imported when a file of it is read (start-up).
                from dpone.connectors.sources.file.jsonl import MAX_JSONL_LINE, jsonl_batches

                yield from jsonl_batches(
                    self.progress.blocks(
                        line_blocks(
                            path, partition, self.jsonl_encoding, self.block_size, MAX_JSONL_LINE
                        )
                    ),
                    chunk_size,
                    self.read_all_as_text,
                    failures,
                    max_columns=self.max_columns,
                )
            else:
                from dpone.connectors.sources.file.parquet import parquet_batches

                yield from parquet_batches(path, partition, chunk_size)
        except OSError as exc:
            raise _read_error(exc, partition) from None


class _Digest:
    """The SHA-256 of a file, hashed before its first chunk is handed out.

    A local file is hashed on a thread of its own while its first chunk is read and parsed:
    both release the GIL, so on two cores the hash adds no wall time (0.06 s for 80 MB). Any
    other file (an object store's, which hashes what it streams and checks it against this
    hash in ``verify``) is hashed first, as before. Setting ``stop`` (the source's
    :meth:`FileSource.stop_reading`) ends a local file's hashing within a megabyte."""

    def __init__(self, path: SourceFile, partition: str, stop: threading.Event) -> None:
        self._partition = partition
        self._digest: str | None = None
        self._error: OSError | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None
        if isinstance(path, LocalFile):
            self._thread = threading.Thread(
                target=self._hash_local, args=(path, stop), name="dpone-file-sha256", daemon=True
            )
            self._thread.start()
        else:
            self._hash(path)

    def _hash_local(self, path: LocalFile, stop: threading.Event) -> None:
        try:
            self._digest = path.sha256(stop)
        except HashStopped:
            self._stopped = True
        except OSError as exc:
            self._error = exc

    def _hash(self, path: SourceFile) -> None:
        try:
            self._digest = path.sha256()
        except OSError as exc:
            self._error = exc

    def result(self) -> str:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._stopped:
            raise SourceUnavailable(f"{self._partition}: reading the file was stopped")
        if self._error is not None:
            name = type(self._error).__name__
            raise SourceUnavailable(f"{self._partition}: cannot read the file ({name})")
        assert self._digest is not None
        return self._digest


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
