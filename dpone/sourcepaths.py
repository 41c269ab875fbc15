"""``source.path`` of a file source: its four forms, its checks, its glob, its matcher.

A path is written in one of four forms, told apart by how it starts:

* relative to the manifest's folder: ``data/*.csv``, ``../shared/*.csv``
* absolute: ``/data/landing/*.csv``
* under the home folder of the user running dpone: ``~/landing/*.csv`` (not ``~user``)
* an object store URI: ``s3://bucket/prefix/*.csv``, ``gs://bucket/...``, ``az://container/...``
  (the bucket is literal; the key is in normal form: no empty, ``.`` or ``..`` segment, since
  an object store has no folders to climb and ``a//b`` is another key than ``a/b``)

Globs (``*``, ``?``, ``[...]``, ``**`` for any depth) may stand in any segment. ``.`` segments
and repeated ``/`` are dropped (:func:`normalize`); ``..`` is kept as written. A matched file
is named by its path in the pattern's own spelling (``../shared/a.csv``, ``/data/a.csv``,
``~/landing/a.csv``): that name is what ``record_ref`` and every artifact carry, never a
resolved machine path. Pure checks (:func:`source_path_problem`, :func:`matches`) do no IO;
:func:`expand` and :func:`resolve` touch the file system.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from pathlib import Path
from typing import Literal

PathKind = Literal["relative", "absolute", "home", "object"]

#: The object stores a file source reads (``dpone.connectors.fs``), by URI scheme.
OBJECT_SCHEMES: tuple[str, ...] = ("s3", "gs", "az")
#: ``source.options.storage`` keys per scheme (the manifest schema lists them all).
STORAGE_OPTIONS: dict[str, tuple[str, ...]] = {
    "s3": ("endpoint_url", "region", "key", "secret", "token", "anonymous"),
    "gs": ("endpoint_url", "project_id", "anonymous"),
    "az": ("account_name", "account_key", "sas_token", "endpoint_url"),
}
#: The storage options that are credentials: a manifest writes them as ``${ENV}`` only.
CREDENTIAL_OPTIONS: tuple[str, ...] = ("key", "secret", "token", "account_key", "sas_token")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# S3, GCS and Azure bucket/container names share this shape (lower case, digits, '.', '-',
# '_'); checking it keeps a glob, a '..' or an empty name out of the bucket.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAGIC = re.compile(r"[*?[]")


def kind(path: str) -> PathKind:
    if is_object_uri(path):
        return "object"
    if path.startswith("/"):
        return "absolute"
    if path == "~" or path.startswith("~/"):
        return "home"
    return "relative"


def is_object_uri(path: str) -> bool:
    """Whether ``path`` names objects of a store dpone reads (``s3://``, ``gs://``, ``az://``)."""
    match = _SCHEME.match(path)
    return match is not None and match[1] in OBJECT_SCHEMES


def split_uri(uri: str) -> tuple[str, str, str]:
    """``(scheme, bucket, key)`` of an object URI (no checks: see :func:`source_path_problem`)."""
    scheme, _, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    return scheme, bucket, key


def _split(path: str) -> tuple[str, list[str]]:
    """The anchor (``/``, ``~/``, ``s3://bucket/`` or empty) and the segments after it."""
    if is_object_uri(path):
        scheme, bucket, key = split_uri(path)
        return f"{scheme}://{bucket}/", key.split("/") if key else []
    k = kind(path)
    rest = path[1:] if k == "absolute" else path[2:] if k == "home" else path
    anchor = {"absolute": "/", "home": "~/", "relative": ""}[k]
    return anchor, rest.split("/") if rest else []


def normalize(path: str) -> str:
    """``path`` without ``.`` segments and repeated or trailing ``/`` (``..`` stays).

    An object URI is returned as written: its key is refused unless already normal.
    """
    if is_object_uri(path):
        return path
    anchor, parts = _split(path)
    return anchor + "/".join(p for p in parts if p not in ("", "."))


def source_path_problem(path: object, *, glob: bool = True) -> str | None:
    """Why ``path`` cannot be a file source path (or a ``record_ref`` path), else None.

    With ``glob`` False the path must already be normal (the spelling a ref carries).
    """
    if not isinstance(path, str) or not path:
        return "is empty"
    if "\x00" in path:
        return "contains a NUL character"
    if _CONTROL.search(path):
        return "contains a control character"
    if "\\" in path:
        return "contains a backslash; separate folders with '/'"
    scheme = _SCHEME.match(path)
    if scheme and scheme[1] not in OBJECT_SCHEMES:
        return (
            f"uses the URL scheme '{scheme[1]}:', which file sources cannot read (local paths, "
            "s3://, gs:// and az:// only)"
        )
    if scheme:
        return _object_uri_problem(path)
    return _local_path_problem(path, glob)


def _local_path_problem(path: str, glob: bool) -> str | None:
    if path.startswith("~") and kind(path) != "home":
        return (
            "starts with '~user'; only '~/' (the home folder of the user running dpone) "
            "is supported"
        )
    if path.endswith("/") and glob:
        return "ends with '/', which names a folder; add a file name or a glob such as '*.csv'"
    anchor, parts = _split(path if not glob else normalize(path))
    if not glob and (normalize(path) != path or not parts):
        return "is not in normal form (no empty or '.' segments, no trailing '/')"
    if not parts or parts[-1] == "..":
        return "names a folder, not files; add a file name or a glob such as '*.csv'"
    if "**" in parts[-1:]:
        return "ends with '**', which matches folders; add a file glob such as '**/*.csv'"
    if anchor == "" and parts[0].startswith("~"):
        return "starts with a folder whose name begins with '~'; write it as an absolute path"
    return None


def _object_uri_problem(uri: str) -> str | None:
    _, bucket, key = split_uri(uri)
    if not _BUCKET.match(bucket):
        return (
            "names a bucket that is not 3..222 lower-case letters, digits, '.', '-' or '_' "
            "(a bucket cannot be a glob)"
        )
    if not key:
        return "names a bucket, not objects; add a key or a glob such as 'prefix/*.csv'"
    if key.endswith("/"):
        return "ends with '/', which names a folder; add a file name or a glob such as '*.csv'"
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return (
            "has an empty, '.' or '..' segment in its key; an object store key is matched "
            "as written, so write it in normal form"
        )
    if parts[-1] == "**":
        return "ends with '**', which matches folders; add a file glob such as '**/*.csv'"
    return None


def is_glob(path: str) -> bool:
    return _MAGIC.search(path) is not None


def glob_root(uri: str) -> tuple[str, list[str]]:
    """The literal ``bucket/prefix`` an object URI's glob starts at (what to list) and the
    glob's segments below it."""
    _, bucket, key = split_uri(uri)
    parts = key.split("/")
    literal = 0
    while literal < len(parts) - 1 and not is_glob(parts[literal]):
        literal += 1
    return "/".join([bucket, *parts[:literal]]), parts[literal:]


def _root(anchor: str, base_dir: Path) -> Path:
    if anchor == "/":
        return Path("/")
    if anchor == "~/":
        return Path(os.path.expanduser("~"))
    return Path(base_dir)


def resolve(path: str, base_dir: Path) -> Path:
    """The file a normal, glob-free ``path`` names (``~`` is the home folder of this process)."""
    anchor, parts = _split(path)
    return _root(anchor, base_dir).joinpath(*parts)


def expand(pattern: str, base_dir: Path) -> list[tuple[str, Path]]:
    """``(spelling, file)`` of every regular file ``pattern`` matches, sorted by spelling."""
    pattern = normalize(pattern)
    anchor, parts = _split(pattern)
    root = _root(anchor, base_dir)
    found: dict[str, Path] = {}
    for match in glob.glob("/".join(parts), root_dir=root, recursive=True):
        full = root / match
        if full.is_file():
            found[anchor + Path(match).as_posix()] = full
    return sorted(found.items())


def matches(pattern: str, path: str) -> bool:
    """Whether the file spelled ``path`` is one ``pattern`` names (pure; glob's rules:
    ``*`` and ``?`` stay within a segment, ``**`` spans segments, and a wildcard does not
    match a name starting with ``.``). An object URI matches only within the pattern's own
    scheme and bucket."""
    p_anchor, p_parts = _split(normalize(pattern))
    f_anchor, f_parts = _split(path)
    return p_anchor == f_anchor and _match_parts(p_parts, f_parts)


def _match_parts(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(
            _match_parts(rest, parts[i:])
            for i in range(len(parts) + 1)
            if not any(p.startswith(".") for p in parts[:i])
        )
    if not parts:
        return False
    name = parts[0]
    if is_glob(head):
        if name.startswith(".") and not head.startswith("."):
            return False
        ok = fnmatch.fnmatchcase(name, head)
    else:
        ok = name == head
    return ok and _match_parts(rest, parts[1:])


__all__ = [
    "CREDENTIAL_OPTIONS",
    "OBJECT_SCHEMES",
    "STORAGE_OPTIONS",
    "PathKind",
    "expand",
    "glob_root",
    "is_glob",
    "is_object_uri",
    "kind",
    "matches",
    "normalize",
    "resolve",
    "source_path_problem",
    "split_uri",
]
