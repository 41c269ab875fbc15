"""Static checks on the manifest's paths: no NUL byte, no DLQ sharing a folder with the
other stores of the work dir. Lexical only (the compiler touches no file): a path is joined
to the manifest's folder and normalized, never resolved through the filesystem.
"""

from __future__ import annotations

import posixpath

from dpone.errors import ErrorDetail
from dpone.manifest.context import (
    LEGACY_QUARANTINE,
    CompileContext,
    Document,
    dlq_directory_is_legacy,
)
from dpone.manifest.pointers import string_values

DLQ_DIRECTORY = "/sink/options/dlq/directory"
EVIDENCE_DIR = "/sink/options/runtime_evidence/output_dir"
#: The work dir's folders besides the DLQ's (SPEC §2: dlq/, state/, evidence/, runs/).
WORK_FOLDERS = ("state", "runs", "evidence")


def check_nul_bytes(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """A NUL byte ends a path in every operating system call: refuse it in any value."""
    return [
        ctx.error(
            "DPONE_MANIFEST_NUL_BYTE",
            "the value holds a NUL byte (\\0), which no path or name may contain",
            pointer,
            fixes=("remove the \\0 (often a stray escape in a double-quoted YAML string)",),
        )
        for pointer, value in string_values(doc, "")
        if "\x00" in value
    ]


def _absolute(ctx: CompileContext, text: str) -> str:
    base = str(ctx.manifest.path.parent)
    return posixpath.normpath(posixpath.join(base, posixpath.expanduser(text)))


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_dlq_directory(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """The DLQ root shares no folder with the work dir's state, runs or evidence, and is not
    the work dir itself (nor above it): retention, verify and recovery own every file below
    the DLQ root, and the other stores must never be read as (or swept like) DLQ files."""
    if not doc["sink"]["options"]["dlq"]["enabled"]:
        return []  # no DLQ files at all
    if any("\x00" in str(v) for v in (doc["runtime"]["work_dir"], _dlq_text(doc))):
        return []  # reported by check_nul_bytes
    work = _absolute(ctx, str(doc["runtime"]["work_dir"]))
    dlq = _absolute(ctx, _dlq_text(doc))
    evidence = _absolute(ctx, str(doc["sink"]["options"]["runtime_evidence"]["output_dir"]))
    others = {f"the work_dir's {name}/ folder": posixpath.join(work, name) for name in WORK_FOLDERS}
    others["the evidence output_dir"] = evidence
    clashes = [
        f"overlaps {what}"
        for what, folder in others.items()
        if _inside(dlq, folder) or _inside(folder, dlq)
    ]
    if _inside(work, dlq):
        clashes.insert(0, "is the work_dir itself" if work == dlq else "contains the work_dir")
    if not clashes:
        return []
    explicit = ctx.manifest.mark(DLQ_DIRECTORY) is not None
    pointer = DLQ_DIRECTORY if explicit else EVIDENCE_DIR
    if dlq_directory_is_legacy(ctx):
        pointer = f"{LEGACY_QUARANTINE}/dir"
    return [
        ctx.error(
            "DPONE_MANIFEST_PATH_OVERLAP",
            f"dlq.directory {clashes[0]}; the DLQ needs a folder of its own",
            pointer,
            fixes=(
                "leave dlq.directory out (default <work_dir>/dlq)",
                "or point it at a folder outside state/, runs/ and the evidence output_dir",
            ),
        )
    ]


def _dlq_text(doc: Document) -> str:
    return str(doc["sink"]["options"]["dlq"]["directory"])


def check_legacy_export_directory(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """The legacy ``quarantine.dir`` export writes ``<dir>/<run_id>/``: it is the DLQ root
    (beside ``runs/`` and ``acks/``) or a folder apart from it, and apart from the work dir
    and its other stores, whose files must never mix with run folders of row values."""
    legacy = doc.get("quarantine")
    if not isinstance(legacy, dict) or "\x00" in str(legacy["dir"]):
        return []
    export = _absolute(ctx, str(legacy["dir"]))
    work = _absolute(ctx, str(doc["runtime"]["work_dir"]))
    dlq = _absolute(ctx, _dlq_text(doc))
    if export == dlq:
        return []  # the DLQ's folder: check_dlq_directory's
    evidence = _absolute(ctx, str(doc["sink"]["options"]["runtime_evidence"]["output_dir"]))
    clashes = [
        f"overlaps {what}"
        for what, folder in {
            **{f"the work_dir's {n}/ folder": posixpath.join(work, n) for n in WORK_FOLDERS},
            "the evidence output_dir": evidence,
        }.items()
        if _inside(export, folder) or _inside(folder, export)
    ]
    if _inside(work, export):
        clashes.insert(0, "is the work_dir itself" if work == export else "contains the work_dir")
    if _inside(export, dlq) or _inside(dlq, export):
        clashes.append("is inside the DLQ folder or contains it")
    if not clashes:
        return []
    return [
        ctx.error(
            "DPONE_MANIFEST_PATH_OVERLAP",
            f"quarantine.dir {clashes[0]}; its run folders need a folder of their own",
            f"{LEGACY_QUARANTINE}/dir",
            fixes=(
                "point it at the DLQ folder (sink.options.dlq.directory) or a folder apart "
                "from the work_dir's stores",
            ),
        )
    ]
