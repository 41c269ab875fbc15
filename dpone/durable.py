"""Durable file writes by path (dlt's ``save_atomic`` is the model).

- :func:`replace_atomic`: temp file in the same folder, fsync, ``os.replace``, fsync the
  folder. Readers see the old or the new bytes, never a mix, also after a power cut.
- :func:`create_only`: the same, but published with ``os.link``, which fails if the name
  exists: a create-only artifact is never overwritten, not even by a racing writer.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(folder: Path, name: str, data: bytes) -> Path:
    temp = folder / f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    os.close(fd)
    return temp


def replace_atomic(
    path: Path, data: bytes, *, before_publish: Callable[[], None] | None = None
) -> None:
    """Write ``data`` to ``path`` atomically and durably, replacing what was there.

    ``before_publish`` runs between the durable temp file and the rename (crash tests).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path.parent, path.name, data)
    try:
        if before_publish is not None:
            before_publish()
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    fsync_dir(path.parent)


def create_only(path: Path, data: bytes) -> None:
    """Publish ``data`` at ``path`` atomically and durably; ``FileExistsError`` if it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path.parent, path.name, data)
    try:
        os.link(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    fsync_dir(path.parent)
