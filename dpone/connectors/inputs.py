"""The one interface of a file source's inputs: local files (``fs.py``) and objects of a store
(``objectstore.py``) alike."""

from __future__ import annotations

from typing import Any, Protocol


class SourceFile(Protocol):
    """One input file: hashed, then opened for reading (and checked after the read)."""

    @property
    def name(self) -> str:
        """Its path or URI (its extension tells how it is compressed)."""
        ...

    def size(self) -> int:
        """Its size in bytes (OSError, or a typed error of the store, when not known)."""
        ...

    def sha256(self) -> str:
        """Hex SHA-256 of the file's bytes (read as a stream)."""
        ...

    def open_stream(self) -> Any:
        """A sequential ``pyarrow`` input stream, decompressed by the name's extension."""
        ...

    def open_random(self) -> Any:
        """A seekable file for ``pyarrow.parquet.ParquetFile`` (a context manager)."""
        ...

    def verify(self, sha256: str) -> None:
        """After a complete read: raise if the bytes read were not those hashed."""
        ...


class Inputs(Protocol):
    """The files of one ``source.path``."""

    def files(self) -> list[tuple[str, SourceFile]]:
        """``(partition, file)`` of every match, sorted by partition; none is an error."""
        ...

    def matches(self, partition: str) -> bool: ...

    def resolve(self, partition: str) -> SourceFile:
        """The file a matching partition (a ``record_ref`` path) names."""
        ...


__all__ = ["Inputs", "SourceFile"]
