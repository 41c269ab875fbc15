"""Reading an evidence bundle or a DLQ index confined to the gate's roots (SPEC §7).

What a bundle says cannot be trusted before it verifies, and neither can where it is: a path
is refused when it is itself a symbolic link, when a symbolic link sits on the way to it
inside a root (a root itself, or a folder above it, may be one: the operator chose it), or
when its real location is outside every root. The file is then opened from the open root one
name at a time without following a link, so a link swapped in after the check fails the open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from dpone.ops.gate.policy import GateUsageError
from dpone.ops.gate.report import GateCode, GateFinding, Subject


class Refused(Exception):
    """A step of a bundle's check failed; carries the finding."""

    def __init__(
        self,
        code: GateCode,
        message: str,
        subject: Subject = "evidence",
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.finding = GateFinding(code, message, subject, pointer)


WHAT: Mapping[Subject, str] = {"evidence": "the bundle", "dlq_index": "the DLQ index"}


def real_root(path: Path, shown: str) -> Path:
    """A ``--root`` resolved (it may be a symlink: the operator chose it); it must exist."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        real = None
    if real is None or not real.is_dir():
        raise GateUsageError(
            "a --root is not an existing folder",
            code="DPONE_GATE_ROOT_NOT_FOUND",
            path=shown,
            fixes=("pass the folder that holds the evidence and the DLQ with --root",),
        )
    return real


def confine(path: Path, roots: Sequence[Path], subject: Subject) -> tuple[Path, tuple[str, ...]]:
    """The root that holds ``path`` and the names that lead from it to ``path``.

    Refused: ``path`` itself a symlink; a symlink that sits inside a root (above the roots,
    symlinks are the operator's business); a real location outside every root.
    """
    what = WHAT[subject]
    try:
        if path.is_symlink():
            raise Refused(GateCode.PATH_REFUSED, f"{what} is a symbolic link", subject)
        for prefix in path.parents:
            if prefix.is_symlink() and _inside(prefix.parent.resolve(), roots):
                raise Refused(
                    GateCode.PATH_REFUSED,
                    f"a folder on the way to {what} is a symbolic link",
                    subject,
                )
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, no entry, a NUL in a name
        raise Refused(GateCode.PATH_REFUSED, f"{what} cannot be resolved", subject) from None
    for root in roots:
        if real.is_relative_to(root) and real != root:
            return root, real.relative_to(root).parts
    raise Refused(GateCode.PATH_REFUSED, f"{what} is outside every --root", subject)


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def read_confined(root: Path, parts: tuple[str, ...], limit: int, subject: Subject) -> bytes | None:
    """The bytes of ``root/parts...`` (``None`` if missing), walked from the open root one
    name at a time without following a link: a symlink swapped in after :func:`confine`
    fails the open instead of being followed."""
    what = WHAT[subject]
    fds: list[int] = []
    try:
        fds.append(os.open(root, _DIR_FLAGS))
        for name in parts[:-1]:
            fds.append(os.open(name, _NOFOLLOW_DIR, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], _READ_FLAGS, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise Refused(GateCode.PATH_REFUSED, f"{what} is not a regular file", subject)
        chunks, size = [], 0
        while size <= limit:  # at most limit + 1 bytes: enough to tell an oversized file
            chunk = os.read(fds[-1], min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(
                GateCode.PATH_REFUSED,
                f"{what} is reached through a symbolic link or a file, not plain folders",
                subject,
            ) from None
        raise Refused(GateCode.UNREADABLE, f"{what} cannot be read", subject) from None
    finally:
        for fd in reversed(fds):
            os.close(fd)
    if size > limit:
        raise Refused(GateCode.UNREADABLE, f"{what} is larger than any such file may be", subject)
    return b"".join(chunks)


def parse(data: bytes, subject: Subject) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise Refused(GateCode.UNREADABLE, f"{WHAT[subject]} is not JSON", subject) from None


def pointer(path: Sequence[Any]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


__all__ = ["WHAT", "Refused", "confine", "parse", "pointer", "read_confined", "real_root"]
