"""Durable, confined file operations on directory file descriptors (POSIX).

Confinement: the store opens its root once and reaches everything else relative to an open
directory descriptor, one safe name at a time, with ``O_NOFOLLOW``. A symlink planted anywhere
inside the tree therefore fails the open (``ELOOP``) instead of being followed, and is
reported as ``DPONE_DLQ_PATH_ESCAPE``; ``..`` and absolute names never get this far (see
:mod:`dpone.dlq.ids`). The root itself may be a symlink: the operator chose it.

Durability:

* create-only files: ``O_CREAT | O_EXCL`` straight at the final name, never replace;
* replaced files (the index): temp file, fsync, ``rename``, fsync the directory;
* segments are published by :func:`dpone.dlq.segments.publish` (temp file, fsync, create-only
  ``link``, fsync the directory): one fsync per chunk of records, not one per record.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from dpone.dlq.errors import DlqError, DlqPathEscape, DlqStorageError

FILE_MODE = 0o640
DIR_MODE = 0o750
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW | os.O_NONBLOCK


@contextmanager
def os_errors(action: str, where: str, *, missing: type[DlqError] | None = None) -> Iterator[None]:
    """Turn an ``OSError`` into a typed DLQ error (a symlink loop into a path escape).

    ``missing`` is the error for a name that does not exist, when that is not a storage fault.
    """
    try:
        yield
    except DlqError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise escape(where) from None
        if missing is not None and exc.errno == errno.ENOENT:
            raise missing(f"{where} does not exist") from None
        raise DlqStorageError.from_oserror(exc, action, where) from None


def escape(where: str) -> DlqPathEscape:
    return DlqPathEscape(
        f"{where} is a symbolic link or not a plain file or folder; "
        "the DLQ store refuses anything that could resolve outside its root"
    )


# --- directories --------------------------------------------------------------------------------


def open_root(path: Path, *, create: bool, missing: type[DlqError] | None = None) -> int:
    """Open the store's root (following a symlink there is allowed), creating it if asked."""
    where = str(path)
    with os_errors("open the DLQ root", where, missing=missing):
        if create:
            path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        return os.open(path, _DIR_FLAGS)


def open_dir(
    parent_fd: int,
    name: str,
    where: str,
    *,
    create: bool = False,
    missing: type[DlqError] | None = None,
) -> tuple[int, bool]:
    """Open child folder ``name`` without following a symlink; ``(fd, created)``.

    The caller fsyncs ``parent_fd`` when ``created`` (the new entry must be durable too).
    """
    created = False
    with os_errors("open", where, missing=missing):
        if create:
            try:
                os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
                created = True
            except FileExistsError:
                pass
        try:
            return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=parent_fd), created
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise escape(where) from None
            raise


def fsync_fd(fd: int, where: str) -> None:
    with os_errors("fsync", where):
        os.fsync(fd)


def entries(dir_fd: int, where: str) -> list[os.DirEntry[str]]:
    """The entries of an open folder (names only; nothing followed)."""
    with os_errors("list", where), os.scandir(dir_fd) as it:
        return list(it)


# --- files --------------------------------------------------------------------------------------


def read_file(dir_fd: int, name: str, where: str, limit: int) -> bytes | None:
    """The bytes of regular file ``name``; ``None`` if it does not exist.

    A symlink or a special file is a path escape. At most ``limit + 1`` bytes are read, so the
    caller can tell an oversized file without holding all of it.
    """
    with os_errors("read", where):
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise escape(where)
            chunks = []
            remaining = limit + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


def create_exclusive(dir_fd: int, name: str, data: bytes | memoryview, *, fsync: bool) -> bool:
    """Create ``name`` holding ``data``; ``False`` (nothing written) if the name exists.

    A failed write removes the file it created, so a full disk never leaves a torn file.
    Raises ``OSError``; callers translate it (this runs in worker threads).
    """
    try:
        fd = os.open(name, _CREATE_FLAGS, FILE_MODE, dir_fd=dir_fd)
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


def temp_name(name: str) -> str:
    return f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"


def replace_atomic(dir_fd: int, name: str, data: bytes, where: str) -> None:
    """Write ``data`` to a temp file, fsync it, rename it over ``name``, fsync the folder."""
    tmp = temp_name(name)
    with os_errors("write", where):
        create_exclusive(dir_fd, tmp, data, fsync=True)
        try:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            unlink_quietly(dir_fd, tmp)
            raise
        os.fsync(dir_fd)


__all__ = [
    "create_exclusive",
    "entries",
    "escape",
    "fsync_fd",
    "open_dir",
    "open_root",
    "os_errors",
    "read_file",
    "replace_atomic",
    "temp_name",
    "unlink_quietly",
]
