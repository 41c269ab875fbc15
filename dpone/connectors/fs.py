"""The filesystem layer of file sources: list the files a ``source.path`` names, open them.

Two kinds of input sit behind one small interface (:class:`SourceFile`, :class:`Inputs`):

* local files (a relative, absolute or ``~/`` path: :mod:`dpone.sourcepaths`), here;
* objects of S3, Google Cloud Storage and Azure Blob Storage (``s3://``, ``gs://``, ``az://``),
  in ``objectstore.py``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone import sourcepaths
from dpone.connectors.errors import (
    SourceConfigError,
    SourceNoFiles,
)
from dpone.connectors.inputs import Inputs, SourceFile
from dpone.connectors.objectstore import ObjectInputs, object_filesystem
from dpone.manifest.specs import StorageOptions
from dpone.records import frozen


def open_inputs(
    pattern: str, base_dir: Path, storage: StorageOptions | None, env: Mapping[str, str]
) -> Inputs:
    """The inputs of ``pattern`` (normalized, checked): local files or objects of a store,
    whose settings' ``${ENV}`` references resolve in ``env`` (and never leave the client)."""
    if sourcepaths.is_object_uri(pattern):
        return ObjectInputs(pattern, object_filesystem(pattern, storage, env))
    if storage is not None:
        raise SourceConfigError(
            "options.storage applies to s3://, gs:// and az:// paths only",
            pointer="/source/options/storage",
        )
    return LocalInputs(pattern, Path(base_dir))


# --- local files ----------------------------------------------------------------------------------


#: How much of a file is hashed between two looks at ``stop`` (:func:`sha256_file`).
HASH_READ = 1 << 20


class HashStopped(Exception):
    """A file's hashing was stopped before its end (:func:`sha256_file`'s ``stop``)."""


def sha256_file(path: Path, stop: threading.Event | None = None) -> str:
    """Hex SHA-256 of a file, read into one reused buffer.

    ``hashlib.file_digest`` does the same loop but cannot be stopped: a run that ends before
    its first chunk (a refused preflight, a locked pipeline) would wait for the whole file to
    be hashed, seconds for a large one. With ``stop``, the loop looks at it every
    :data:`HASH_READ` bytes and raises :class:`HashStopped` once it is set."""
    digest = hashlib.sha256()
    buffer = bytearray(HASH_READ)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as fh:
        while size := fh.readinto(buffer):
            if stop is not None and stop.is_set():
                raise HashStopped(str(path))
            digest.update(view[:size])
    return digest.hexdigest()


@frozen
class LocalFile:
    """A file on a local disk: hashed before it is read (a file is re-read by the replay)."""

    path: Path

    @property
    def name(self) -> str:
        return str(self.path)

    def size(self) -> int:
        return self.path.stat().st_size

    def sha256(self, stop: threading.Event | None = None) -> str:
        return sha256_file(self.path, stop)

    def open_stream(self) -> Any:
        return pa.input_stream(str(self.path), compression="detect")

    def open_random(self) -> Any:
        return pa.OSFile(str(self.path))

    def verify(self, sha256: str) -> None:
        del sha256  # hashed right before the read; the replay hashes again before trusting it


@frozen
class LocalInputs:
    """The local files a glob names; a relative glob is resolved under ``base_dir``."""

    pattern: str
    base_dir: Path

    def files(self) -> list[tuple[str, SourceFile]]:
        found = sourcepaths.expand(self.pattern, self.base_dir)
        if not found:
            raise SourceNoFiles(
                f"source path {self.pattern!r} matched no file",
                fixes=(
                    "check the glob; a relative path is relative to the manifest's folder, "
                    "'~/' is the home folder of the user running dpone",
                ),
            )
        return [(partition, LocalFile(path)) for partition, path in found]

    def matches(self, partition: str) -> bool:
        return sourcepaths.matches(self.pattern, partition)

    def resolve(self, partition: str) -> SourceFile:
        return LocalFile(sourcepaths.resolve(partition, self.base_dir))


__all__ = [
    "HASH_READ",
    "HashStopped",
    "Inputs",
    "LocalFile",
    "LocalInputs",
    "SourceFile",
    "open_inputs",
    "sha256_file",
]
