"""The filesystem sink's read-back documents, checked before the sink acts on them.

A load marker (``_dpone_loads/<load_id>.json``) names files the sink moves and deletes, and
a staging token (``_dpone_staging/<load_id>/_load.json``) says which staging folder a marker
completes. Both are input (STYLE habit 14): a planted or edited one must not make dpone
delete or overwrite anything outside the sink folder. So each is parsed against its schema
(strict keys and types) and checksum, and every path in a marker must be a relative name in
the folder the marker's own load and target allow, which still resolves inside the sink
folder once symlinks are followed. Anything else is ``DPONE_SINK_MARKER_INVALID``.

A checksum does not stop someone who can write the sink folder from planting a consistent
marker and token. With a signing key configured (``dpone/signing.py``) both are signed when
written, a present signature is always verified, and :func:`require_signed` refuses an
unsigned one where the sink acts on it: completing a staged commit (which moves and deletes
files) and telling recovery that a load committed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson

from dpone import signing
from dpone.canonical import verify_checksum
from dpone.connectors.errors import SinkMarkerInvalid
from dpone.published import schema_errors

MARKER_SCHEMA = "dpone.sink-load-marker.v1"
TOKEN_SCHEMA = "dpone.sink-staging-token.v1"
STAGING = "_dpone_staging"
LOADS = "_dpone_loads"
TOKEN_FILE = "_load.json"
MAX_MARKER_BYTES = 64 * 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024

_IDENTIFIER = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_FILE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}\.parquet")
_TOKEN = re.compile(r"[0-9a-f]{32}")
_TOKEN_KEYS = frozenset({"schema", "load_id", "pipeline", "target", "token", "sha256"})

FIX_MARKER = (
    "a file under _dpone_loads/ or _dpone_staging/ of the sink folder is not one dpone wrote "
    "(edited, planted or damaged); compare the sink folder with a backup, move the named file "
    "(and _dpone_staging/<load id>/ if present) out of the sink folder, then rerun",
)


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def _invalid(what: str) -> SinkMarkerInvalid:
    return SinkMarkerInvalid(f"filesystem sink: {what}", fixes=FIX_MARKER)


def _name(path: Path) -> str:
    """The file's name for a message, only if it is a safe identifier (names can be planted)."""
    return f"{path.parent.name}/{path.name}" if is_identifier(path.stem) else "a file"


def _load(path: Path, limit: int) -> Any:
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except IsADirectoryError:
        raise _invalid(f"{_name(path)} is not a regular file") from None
    if len(raw) > limit:
        raise _invalid(f"{_name(path)} is larger than any marker dpone writes")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _invalid(f"{_name(path)} is not JSON") from None


def read_marker(path: Path, root: Path) -> dict[str, Any]:
    """The marker at ``path`` (``<root>/_dpone_loads/<id>.json``), checked; else refused."""
    if not is_identifier(path.stem) or path.is_symlink():
        raise _invalid(f"{_name(path)} is not a load marker dpone wrote")
    doc = _load(path, MAX_MARKER_BYTES)
    label = _name(path)
    if not isinstance(doc, dict) or schema_errors(doc, MARKER_SCHEMA):
        raise _invalid(f"{label} is not a valid {MARKER_SCHEMA}")
    if not verify_checksum(doc):
        raise _invalid(f"{label} does not match its checksum")
    require_signed(doc, label, require=False)
    if doc["load_id"] != path.stem:
        raise _invalid(f"{label} names another load than its file name")
    for key in ("load_id", "pipeline", "run_id"):
        if not is_identifier(doc[key]):
            raise _invalid(f"{label}: {key} is not a safe identifier")
    if doc.get("keys") and not all(is_identifier(k) for k in doc["keys"]):
        raise _invalid(f"{label}: an idempotency key is not a safe identifier")
    dataset, _, table = doc["target"].partition(".")
    if not (is_identifier(dataset) and is_identifier(table)):
        raise _invalid(f"{label}: target is not dataset.table")
    staged_dir = f"{STAGING}/{doc['load_id']}/"
    table_dir = f"{dataset}/{table}/"
    for staged, final in doc["adds"]:
        _confined(root, staged, staged_dir, label)
        _confined(root, final, table_dir, label)
    for rel in doc["removes"]:
        _confined(root, rel, table_dir, label)
    return doc


def _confined(root: Path, rel: object, folder: str, label: str) -> None:
    """``rel`` is ``<folder><file>.parquet`` and resolves (symlinks followed) inside root."""
    if not isinstance(rel, str) or not rel.startswith(folder):
        raise _invalid(f"{label} names a file outside the folder its load may touch")
    if not _FILE.fullmatch(rel[len(folder) :]):
        raise _invalid(f"{label} names a file that is not a Parquet file of the table")
    base = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(base, rel))
    if os.path.commonpath([base, resolved]) != base:
        raise _invalid(f"{label} names a file that resolves outside the sink folder")


def token_doc(load_id: str, pipeline: str, target: str, token: str) -> dict[str, Any]:
    return {
        "schema": TOKEN_SCHEMA,
        "load_id": load_id,
        "pipeline": pipeline,
        "target": target,
        "token": token,
    }


def read_token(path: Path) -> dict[str, Any]:
    """A staging folder's ``_load.json``, checked; else refused."""
    if path.is_symlink():
        raise _invalid("a staging token is a symbolic link")
    doc = _load(path, MAX_TOKEN_BYTES)
    if (
        not isinstance(doc, dict)
        or set(doc) - {signing.MEMBER} != _TOKEN_KEYS
        or doc["schema"] != TOKEN_SCHEMA
        or not all(isinstance(doc[k], str) for k in _TOKEN_KEYS)
        or not _TOKEN.fullmatch(doc["token"])
        or doc["load_id"] != path.parent.name
        or not is_identifier(doc["load_id"])
        or not is_identifier(doc["pipeline"])
    ):
        raise _invalid(f"the staging token of {_name(path.parent)} is not one dpone wrote")
    if not verify_checksum(doc):
        raise _invalid(f"the staging token of {_name(path.parent)} does not match its checksum")
    require_signed(doc, f"the staging token of {_name(path.parent)}", require=False)
    return doc


def require_signed(doc: dict[str, Any], label: str, *, require: bool = True) -> None:
    """A present signature must verify; with ``require`` (and a key configured) it must
    exist too. Refused as ``DPONE_SINK_MARKER_INVALID``, naming the file."""
    ring = signing.keyring()
    found = signing.problem(doc, ring, require=require and ring.can_verify, what=label)
    if found is not None:
        raise _invalid(f"{found[1]} ({found[0]})")
