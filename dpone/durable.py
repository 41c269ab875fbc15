"""Durable file writes: the one implementation every store uses (dlt's ``save_atomic`` is the
model). Everything here raises ``OSError`` only; callers translate it into their own errors.

The primitives work on an open directory descriptor, one name at a time (the DLQ store
confines every path that way, see :mod:`dpone.dlq.fsio`); the path-based functions open the
folder and call them.

- :func:`replace_at` / :func:`replace_atomic`: temp file in the same folder, fsync,
  ``rename`` over the name, fsync the folder. Readers see the old or the new bytes, never a
  mix, also after a power cut.
- :func:`link_at` / :func:`create_only`: the same, but published with ``link``, which fails
  if the name exists: a create-only file is never overwritten, not even by a racing writer,
  and never carries its final name while half-written.
- :func:`create_exclusive`: ``O_CREAT | O_EXCL`` straight at a name (temp files, and files
  whose name alone makes them unique).

Temporary names are ``.<name>.tmp-<pid>-<token>`` (:func:`temp_name`, :func:`is_temp_name`):
a crash leaves at most such a file, which its store recognises and removes.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

#: The mode of a file written by path; the DLQ store passes its own, tighter mode.
FILE_MODE = 0o644
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


# --- names --------------------------------------------------------------------------------------


def temp_name(name: str) -> str:
    """A fresh temporary name for ``name``, in the same folder."""
    return f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"


def is_temp_name(name: str) -> bool:
    """A temporary file an interrupted write left (see :func:`temp_name`)."""
    return name.startswith(".") and ".tmp-" in name


# --- primitives on a directory descriptor ---------------------------------------------------------


def create_exclusive(
    dir_fd: int, name: str, data: bytes | memoryview, *, fsync: bool, mode: int = FILE_MODE
) -> bool:
    """Create ``name`` holding ``data``; ``False`` (nothing written) if the name exists.

    A failed write removes the file it created, so a full disk never leaves a torn file.
    """
    try:
        fd = os.open(name, _CREATE_FLAGS, mode, dir_fd=dir_fd)
    except FileExistsError:
        return False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(dir_fd, name)
        raise
    os.close(fd)
    return True


def unlink_quietly(dir_fd: int, name: str) -> None:
    with suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def replace_at(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    before_publish: Callable[[], None] | None = None,
) -> None:
    """Write ``data`` to a temp file, fsync it, rename it over ``name``, fsync the folder.

    ``before_publish`` runs between the durable temp file and the rename (crash tests).
    """
    tmp = temp_name(name)
    create_exclusive(dir_fd, tmp, data, fsync=True, mode=mode)
    try:
        if before_publish is not None:
            before_publish()
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_quietly(dir_fd, tmp)
        raise
    os.fsync(dir_fd)


def link_at(
    dir_fd: int,
    name: str,
    data: bytes | memoryview,
    *,
    mode: int = FILE_MODE,
    before_link: Callable[[], None] | None = None,
) -> bool:
    """Publish ``data`` as ``name``, create-only and durable; ``False`` if ``name`` exists.

    Temp file, fsync, ``link`` to the final name, unlink the temp name, fsync the folder.
    """
    tmp = temp_name(name)
    create_exclusive(dir_fd, tmp, data, fsync=True, mode=mode)
    try:
        if before_link is not None:
            before_link()
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            created = True
        except FileExistsError:
            created = False
    finally:
        unlink_quietly(dir_fd, tmp)
    os.fsync(dir_fd)
    return created


# --- by path ------------------------------------------------------------------------------------


@contextmanager
def open_folder(path: Path) -> Iterator[int]:
    """An open descriptor of folder ``path`` (created with its parents if missing)."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def replace_atomic(
    path: Path, data: bytes, *, before_publish: Callable[[], None] | None = None
) -> None:
    """Write ``data`` to ``path`` atomically and durably, replacing what was there."""
    with open_folder(path.parent) as dir_fd:
        replace_at(dir_fd, path.name, data, before_publish=before_publish)


def create_only(path: Path, data: bytes) -> None:
    """Publish ``data`` at ``path`` atomically and durably; ``FileExistsError`` if it exists."""
    with open_folder(path.parent) as dir_fd:
        if not link_at(dir_fd, path.name, data):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path, *, missing_ok: bool = False) -> None:
    """Make the entries of folder ``path`` durable (``missing_ok``: a missing folder is fine)."""
    if missing_ok and not path.is_dir():
        return
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "FILE_MODE",
    "create_exclusive",
    "create_only",
    "fsync_dir",
    "fsync_file",
    "is_temp_name",
    "link_at",
    "open_folder",
    "replace_at",
    "replace_atomic",
    "temp_name",
    "unlink_quietly",
]
