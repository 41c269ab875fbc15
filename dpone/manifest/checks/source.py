"""A file source's path and options, refused here where its reader would refuse them at run
time."""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext, Document
from dpone.sourcepaths import source_path_problem


def check_source(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """What a file source's reader would refuse at run time, refused here first: the path's
    form (a path that matches no file is a run-time matter, DPONE_SOURCE_NO_FILES) and the
    text encodings and quoting of its options."""
    source = doc["source"]
    if source.get("type") != "file":
        return []
    errors = []
    problem = source_path_problem(source["path"])
    # A NUL byte is reported once, for every manifest value, by paths.check_nul_bytes.
    if problem is not None and "\x00" not in str(source["path"]):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_PATH",
                f"source path {problem}",
                "/source/path",
                fixes=(
                    "write a path relative to the manifest's folder (data/*.csv, ../shared/*.csv)"
                    ", an absolute one (/data/landing/*.csv), one under ~/, or an object store "
                    "URI (s3://bucket/prefix/*.csv, gs://..., az://...)",
                ),
            )
        )
    options = source.get("options", {})
    for fmt in ("csv", "jsonl"):
        encoding = options.get(fmt, {}).get("encoding")
        if encoding is not None and not _is_codec(encoding):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SOURCE_OPTION",
                    f"encoding '{encoding}' is not a known text encoding",
                    f"/source/options/{fmt}/encoding",
                    fixes=("use a Python codec name such as utf-8, latin-1 or cp1252",),
                )
            )
    csv = options.get("csv", {})
    if csv.get("quote_char") is not None and csv.get("quote_char") == csv.get("delimiter", ","):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "csv quote_char and delimiter must differ",
                "/source/options/csv/quote_char",
                fixes=("choose another quote_char or delimiter",),
            )
        )
    for key in ("delimiter", "quote_char"):
        if csv.get(key) in ("\n", "\r"):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SOURCE_OPTION",
                    f"csv {key} cannot be a line break",
                    f"/source/options/csv/{key}",
                    fixes=("use a printable character such as , ; | or a tab",),
                )
            )
    return errors


def _is_codec(name: str) -> bool:
    try:
        "".encode(name)  # a text encoding, not only a codec (rot13 and hex are refused)
    except LookupError:
        return False
    return True
