"""How far a source has read, in bytes, for a progress display's share and ETA.

A source that knows its size (a file source: the files' sizes on disk or in the store) has a
``read_progress()`` method returning ``(bytes_read, bytes_total)``; ``bytes_total`` is None
when the size is not known. The run calls it between chunks; the file source's reading runs
on the read-ahead thread (``runtime/prefetch.py``), so :class:`ReadProgress` keeps its
numbers behind a lock: the reader writes them, the run's thread reads them.

Bytes count where the file is: a plain CSV or JSON Lines file moves block by block, a
compressed one (its decompressed size is not known in advance) and a Parquet file (read by
row groups inside pyarrow) move by whole files.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

import pyarrow as pa


class _Block(Protocol):
    @property
    def data(self) -> bytes | memoryview: ...


class SizedFile(Protocol):
    """A file whose size is known (``dpone.connectors.fs.SourceFile``)."""

    @property
    def name(self) -> str:
        """The file's path or URI (its extension tells a compressed file)."""
        ...

    def size(self) -> int:
        """Its size in bytes (OSError when it cannot be known)."""
        ...


Block = TypeVar("Block", bound=_Block)


@runtime_checkable
class MeasuredSource(Protocol):
    def read_progress(self) -> tuple[int, int | None]:
        """``(bytes_read, bytes_total)`` so far; ``bytes_total`` None when unknown."""
        ...


def compressed(path: Path | str) -> bool:
    """Whether pyarrow decompresses ``path`` as it reads it (by its extension, as
    ``pa.input_stream(..., compression="detect")`` decides)."""
    try:
        pa.Codec.detect(str(path))
    except (TypeError, ValueError):  # no codec for the extension: read as it is
        return False
    return True


class ReadProgress:
    """Bytes read of the files of one read (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total: int | None = None
        self._done = 0  # the files read to their end
        self._file_size = 0  # the file being read
        self._file_read = 0  # ... and how much of it
        self._file_measured = False

    def start(self, files: Iterable[SizedFile]) -> None:
        """A new read of ``files``: their sizes are the total."""
        total = 0
        for file in files:
            with contextlib.suppress(OSError):  # reading it fails then, with its own error
                total += file.size()
        with self._lock:
            self._total, self._done, self._file_size, self._file_read = total, 0, 0, 0

    def begin_file(self, file: SizedFile, *, by_block: bool) -> None:
        """``file`` is read next; ``by_block``: its blocks are counted as they are read."""
        try:
            size = file.size()
        except OSError:
            size = 0
        with self._lock:
            self._file_size, self._file_read = size, 0
            self._file_measured = by_block and not compressed(file.name)

    def blocks(self, blocks: Iterable[Block]) -> Iterator[Block]:
        """``blocks`` unchanged, each counted by ``len(block.data)`` once it was read (a block
        the reader refused comes again: it counts then)."""
        for block in blocks:
            yield block
            tentative = getattr(block, "tentative", None)
            if tentative is None or not tentative.refused:
                self.advance(len(block.data))

    def advance(self, n: int) -> None:
        with self._lock:
            if self._file_measured:
                self._file_read = min(self._file_read + n, self._file_size)

    def end_file(self) -> None:
        with self._lock:
            self._done += self._file_size
            self._file_size = self._file_read = 0

    def snapshot(self) -> tuple[int, int | None]:
        with self._lock:
            return self._done + self._file_read, self._total


__all__ = ["MeasuredSource", "ReadProgress", "SizedFile", "compressed"]
