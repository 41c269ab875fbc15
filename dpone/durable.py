"""Durable file writes: the one implementation every store uses (dlt's ``save_atomic`` is the
model). Everything here raises ``OSError`` (callers translate it into their own errors),
but for a refused link (below).

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

Confinement (:func:`open_below`): a folder the user chose (the work dir, a sink folder, a
folder the manifest names outside the work dir) is the *anchor*; it may be a symlink and is
followed once. Every folder dpone keeps below it (``runs/``, ``state/``, ``evidence/``,
``_dpone_staging/``, ...) is opened one name at a time with ``O_NOFOLLOW`` on directory
descriptors, as the DLQ store does, and a link there is :class:`~dpone.errors.PathIsSymlink`
(the one non-``OSError`` raised here): someone who can write the work dir must not redirect a
write, or a deletion, through it. Files are created ``O_NOFOLLOW`` in those descriptors.

Modes: files 0640, folders 0750 (minus the umask): nothing dpone writes is world-readable.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from dpone.errors import PathIsSymlink

#: The mode of every file dpone writes, and of every folder it creates (minus the umask).
FILE_MODE = 0o640
DIR_MODE = 0o750
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
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
    fsync: bool = True,
) -> bool:
    """Publish ``data`` as ``name``, create-only and durable; ``False`` if ``name`` exists.

    Temp file, fsync, ``link`` to the final name, unlink the temp name, fsync the folder.
    ``fsync=False`` keeps the publishing atomic (never a torn file under ``name``) but not
    durable: for files that no longer matter once the machine went down.
    """
    tmp = temp_name(name)
    create_exclusive(dir_fd, tmp, data, fsync=fsync, mode=mode)
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
    if fsync:
        os.fsync(dir_fd)
    return created


# --- confined folders ---------------------------------------------------------------------------


def make_dirs(path: Path) -> None:
    """``mkdir -p`` with :data:`DIR_MODE` for every folder it creates (``Path.mkdir`` gives
    the parents the default mode)."""
    missing: list[Path] = []
    at = path
    while not os.path.isdir(at):
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for folder in reversed(missing):
        with suppress(FileExistsError):
            os.mkdir(folder, DIR_MODE)


def parts_below(anchor: Path, path: Path) -> tuple[str, ...]:
    """The names leading from ``anchor`` to ``path`` (lexically); ``()`` when ``path`` is not
    below ``anchor`` (or is it): then ``path`` itself is the anchor."""
    try:
        rel = Path(os.path.normpath(path)).relative_to(os.path.normpath(anchor))
    except ValueError:
        return ()
    parts = rel.parts
    return () if any(p in ("", ".", "..") for p in parts) else parts


def symlink_refused(label: str) -> PathIsSymlink:
    return PathIsSymlink(
        f"{label} is a symbolic link, or not the plain folder or file dpone keeps there; "
        "dpone never follows a link below the work dir or a sink folder",
        path=label,
        fixes=(
            f"move {label} aside (compare what it points to with a backup) and rerun; dpone "
            "creates the folder anew",
            "to keep dpone's files elsewhere, point runtime.work_dir (or the sink's path) at "
            "that place instead: a folder the manifest names may be a link",
        ),
    )


def open_below(anchor: Path, path: Path, *, create: bool, label: str = "") -> int | None:
    """A descriptor of folder ``path``: ``anchor`` followed, every name below it opened with
    ``O_NOFOLLOW`` (created 0750 when ``create``); ``None`` when a folder is missing and not
    ``create``. A link or a file in the way is :class:`PathIsSymlink` naming it (``label``
    prefixes the names, e.g. the sink's folder)."""
    parts = parts_below(anchor, path) if anchor != path else ()
    if not parts:
        anchor = path
    if create:
        make_dirs(anchor)
    try:
        fd = os.open(anchor, _DIR_FLAGS)
    except FileNotFoundError:
        if create:
            raise
        return None
    for i, part in enumerate(parts):
        try:
            if create:
                try:
                    os.mkdir(part, DIR_MODE, dir_fd=fd)
                    os.fsync(fd)  # the new entry is durable too
                except FileExistsError:
                    pass
            child = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            if create:
                raise
            return None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise symlink_refused("/".join(p for p in (label, *parts[: i + 1]) if p)) from None
            raise
        os.close(fd)
        fd = child
    return fd


def make_below(anchor: Path, path: Path, *, label: str = "") -> None:
    """Create folder ``path`` (and those above it, up to ``anchor``) as :func:`open_below`."""
    fd = open_below(anchor, path, create=True, label=label)
    if fd is not None:
        os.close(fd)


def check_below(anchor: Path, path: Path, *, label: str = "") -> None:
    """Refuse a link (or a file) anywhere from below ``anchor`` down to ``path``; a missing
    folder is fine (it will be created through :func:`open_below`)."""
    fd = open_below(anchor, path, create=False, label=label)
    if fd is not None:
        os.close(fd)


def remove_tree_at(dir_fd: int, name: str) -> bool:
    """Remove entry ``name`` of an open folder and all below it, following no link (a link
    there is unlinked itself); ``True`` if there was something to remove."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # fd-based: never leaves the folder through a link
    else:
        os.unlink(name, dir_fd=dir_fd)
    os.fsync(dir_fd)
    return True


def remove_tree_below(anchor: Path, path: Path, *, label: str = "") -> bool:
    """:func:`remove_tree_at` of ``path``, its folder reached as :func:`open_below` does."""
    dir_fd = open_below(anchor, path.parent, create=False, label=label)
    if dir_fd is None:
        return False
    try:
        return remove_tree_at(dir_fd, path.name)
    finally:
        os.close(dir_fd)


# --- by path ------------------------------------------------------------------------------------


@contextmanager
def open_folder(path: Path, *, anchor: Path | None = None) -> Iterator[int]:
    """An open descriptor of folder ``path`` (created with its parents if missing); with an
    ``anchor``, every folder below it is reached without following links (:func:`open_below`)."""
    fd = open_below(path if anchor is None else anchor, path, create=True)
    assert fd is not None  # created
    try:
        yield fd
    finally:
        os.close(fd)


def replace_atomic(
    path: Path,
    data: bytes,
    *,
    before_publish: Callable[[], None] | None = None,
    anchor: Path | None = None,
) -> None:
    """Write ``data`` to ``path`` atomically and durably, replacing what was there."""
    with open_folder(path.parent, anchor=anchor) as dir_fd:
        replace_at(dir_fd, path.name, data, before_publish=before_publish)


def create_only(path: Path, data: bytes, *, anchor: Path | None = None, fsync: bool = True) -> None:
    """Publish ``data`` at ``path`` atomically and durably (not durably with ``fsync=False``,
    see :func:`link_at`); ``FileExistsError`` if it exists."""
    with open_folder(path.parent, anchor=anchor) as dir_fd:
        if not link_at(dir_fd, path.name, data, fsync=fsync):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))


def read_below(anchor: Path, path: Path, limit: int) -> bytes | None:
    """At most ``limit + 1`` bytes of regular file ``path`` (its folder reached as
    :func:`open_below` does, the file opened ``O_NOFOLLOW``); ``None`` if it does not exist.
    A link or a non-file at the name is :class:`PathIsSymlink`."""
    dir_fd = open_below(anchor, path.parent, create=False)
    if dir_fd is None:
        return None
    try:
        try:
            fd = os.open(path.name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise symlink_refused(_label(anchor, path)) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise symlink_refused(_label(anchor, path))
            with os.fdopen(os.dup(fd), "rb") as handle:
                return handle.read(limit + 1)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _label(anchor: Path, path: Path) -> str:
    return "/".join(parts_below(anchor, path)) or path.name


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
    "DIR_MODE",
    "FILE_MODE",
    "check_below",
    "create_exclusive",
    "create_only",
    "fsync_dir",
    "fsync_file",
    "is_temp_name",
    "link_at",
    "make_below",
    "make_dirs",
    "open_below",
    "open_folder",
    "parts_below",
    "read_below",
    "remove_tree_at",
    "remove_tree_below",
    "replace_at",
    "replace_atomic",
    "symlink_refused",
    "temp_name",
    "unlink_quietly",
]
