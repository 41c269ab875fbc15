"""A run's writer lock: one live writer per run, dropped by the kernel when its holder dies."""

from __future__ import annotations

import fcntl
import os
import stat

from dpone import durable
from dpone.dlq import fsio
from dpone.dlq.layout import LOCK_FILE


def name_exists(dir_fd: int, name: str, where: str) -> bool:
    """Whether ``name`` exists in ``dir_fd`` (a symlink there is a path escape)."""
    with fsio.os_errors("inspect", where):
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
    if stat.S_ISLNK(info.st_mode):
        raise fsio.escape(where)
    return True


def take_lock(run_fd: int, where: str, *, create: bool) -> int | None:
    """Take the run's writer lock without waiting; ``None`` if a live process holds it.

    ``flock`` locks belong to the open file, so the kernel drops them when their holder dies
    (SIGKILL included): a lock that can be taken means the writer is gone.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    with fsio.os_errors("lock", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, flags, fsio.FILE_MODE, dir_fd=run_fd)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _still_named(fd, run_fd):
                # The holder released it and removed the name between our open and our
                # flock: this lock is on a file nobody else will look at any more.
                os.close(fd)
                return take_lock(run_fd, where, create=create) if create else None
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def _still_named(fd: int, run_fd: int) -> bool:
    """Whether ``LOCK_FILE`` in ``run_fd`` is still the file open as ``fd``."""
    try:
        named = os.stat(LOCK_FILE, dir_fd=run_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def writer_alive(run_fd: int, where: str) -> bool:
    """Whether a live process holds the run's writer lock (nothing is created or changed)."""
    with fsio.os_errors("inspect", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=run_fd)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def release_lock(run_fd: int, lock_fd: int) -> None:
    """Remove the lock file, then let go of the lock (the run is no longer being written).

    Removing the name while still holding the lock is what makes it safe: a process that
    opened the old file meanwhile gets the lock only after we let go, and then sees that
    the name is gone (:func:`take_lock` checks the inode after ``flock``) and backs off.
    """
    durable.unlink_quietly(run_fd, LOCK_FILE)
    os.close(lock_fd)


__all__ = ["name_exists", "release_lock", "take_lock", "writer_alive"]
