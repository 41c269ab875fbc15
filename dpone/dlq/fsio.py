"""Confined file operations of the DLQ store on directory file descriptors (POSIX), and the
translation of ``OSError`` into typed DLQ errors. The durable writes themselves are
:mod:`dpone.durable`'s; this module adds confinement and the error contract on top.

Confinement: the store opens its root once and reaches everything else relative to an open
directory descriptor, one safe name at a time, with ``O_NOFOLLOW``. A symlink planted anywhere
inside the tree therefore fails the open (``ELOOP``) instead of being followed, and is
reported as ``DPONE_DLQ_PATH_ESCAPE``; ``..`` and absolute names never get this far
(:func:`check_identifier`). The root itself may be a symlink: the operator chose it.

Durability:

* create-only files: ``O_CREAT | O_EXCL`` straight at the final name, never replace;
* replaced files (the index): temp file, fsync, ``rename``, fsync the directory;
* segments are published by :func:`dpone.dlq.segments.publish` (temp file, fsync, create-only
  ``link``, fsync the directory): one fsync per chunk of records, not one per record.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpone import durable
from dpone.dlq.errors import DlqError, DlqInvalidIdentifier, DlqPathEscape, DlqStorageError
from dpone.ids import is_identifier

FILE_MODE = 0o640
DIR_MODE = 0o750
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW | os.O_NONBLOCK


def check_identifier(value: object, kind: str) -> str:
    """Return ``value`` if it is a safe identifier (:func:`dpone.ids.is_identifier`); refuse it
    otherwise.

    A value that could move a path (a separator, ``..``, an absolute path) is a
    ``DPONE_DLQ_PATH_ESCAPE``; any other unsafe value is ``DPONE_DLQ_INVALID_ID``. The message
    never repeats the value.
    """
    if is_identifier(value):
        return value
    fixes = (f"pass the {kind} as dpone printed it (dpone ops dlq summary lists the run ids)",)
    if isinstance(value, str) and (
        "/" in value or "\\" in value or value.startswith(".") or "\x00" in value
    ):
        raise DlqPathEscape(
            f"the {kind} would leave its folder in the DLQ store; identifiers are "
            "[A-Za-z0-9._-], 1 to 128 characters, not starting with '.'",
            fixes=fixes,
        )
    raise DlqInvalidIdentifier(
        f"the {kind} is not a safe identifier: [A-Za-z0-9._-], 1 to 128 characters, "
        "not starting with '.'",
        fixes=fixes,
    )


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
            durable.make_dirs(path)  # every folder it creates 0750, not only the last
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


def replace_atomic(dir_fd: int, name: str, data: bytes, where: str) -> None:
    """:func:`dpone.durable.replace_at` with the store's file mode and error contract."""
    with os_errors("write", where):
        durable.replace_at(dir_fd, name, data, mode=FILE_MODE)


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "check_identifier",
    "entries",
    "escape",
    "fsync_fd",
    "open_dir",
    "open_root",
    "os_errors",
    "read_file",
    "replace_atomic",
]
