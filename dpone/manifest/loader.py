"""Read a manifest file into plain JSON-compatible data plus line/column marks.

The only module of the compiler that touches files: it reads the text (bounded, UTF-8) and
reports what cannot be parsed; ``yamlnodes`` decides what a manifest may hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml.error import MarkedYAMLError, YAMLError

from dpone.errors import ErrorDetail, ManifestError
from dpone.manifest.yamlnodes import (
    Abort,
    Mark,
    NodeConverter,
    check_events,
    compose,
    value_mark,
)
from dpone.records import frozen

MAX_MANIFEST_BYTES = 1_048_576


@frozen
class LoadedManifest:
    """A parsed manifest: its document as plain data and the line/column marks of its pointers."""

    path: Path
    display_path: str
    document: Any
    marks: dict[str, Mark]

    def mark(self, pointer: str) -> Mark | None:
        return self.marks.get(pointer)


def locate(
    manifest: LoadedManifest, pointer: str, *, at_key: bool
) -> tuple[int | None, int | None]:
    """Line and column for a pointer: the key's position when asked and known, else the value's.

    A pointer with no mark of its own (a key that is missing) falls back to its nearest parent.
    """
    probe = pointer
    while True:
        mark = manifest.mark(probe)
        if mark is not None:
            if at_key and mark.key_line is not None:
                return mark.key_line, mark.key_column
            return mark.line, mark.column
        if not probe:
            return None, None
        probe = probe.rsplit("/", 1)[0]


def _syntax_error(exc: YAMLError, path: str) -> ManifestError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or "the YAML cannot be parsed"
    code = "DPONE_MANIFEST_YAML_SYNTAX"
    fixes = ("check indentation, colons and quotes around this position",)
    if "expected a single document" in str(exc):
        code = "DPONE_MANIFEST_MULTIPLE_DOCUMENTS"
        problem = "the file holds more than one YAML document"
        fixes = ("keep one manifest per file; remove the extra '---' document",)
    detail = ErrorDetail(
        code=code,
        message=str(problem),
        stage="load",
        path=path,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
        fixes=fixes,
    )
    return ManifestError.collect([detail], path)


def _file_error(code: str, message: str, path: str, fix: str) -> ManifestError:
    return ManifestError.collect(
        [ErrorDetail(code=code, message=message, stage="load", path=path, fixes=(fix,))], path
    )


def read_manifest_text(path: Path, display_path: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise _file_error(
                "DPONE_MANIFEST_TOO_LARGE",
                f"the manifest is {size} bytes; the limit is {MAX_MANIFEST_BYTES}",
                display_path,
                "a manifest describes a load; move data out of it",
            )
        raw = path.read_bytes()
    except IsADirectoryError:
        raise _file_error(
            "DPONE_MANIFEST_NOT_FOUND",
            "the manifest path is a directory",
            display_path,
            "pass the manifest file, e.g. manifest.yaml",
        ) from None
    except OSError as exc:
        raise _file_error(
            "DPONE_MANIFEST_NOT_FOUND",
            f"cannot read the manifest ({exc.strerror or type(exc).__name__})",
            display_path,
            "check the path and its permissions",
        ) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _file_error(
            "DPONE_MANIFEST_ENCODING",
            f"the manifest is not UTF-8 (invalid byte at offset {exc.start})",
            display_path,
            "save the file as UTF-8",
        ) from None


def parse_manifest(text: str, *, path: Path, display_path: str) -> LoadedManifest:
    """Parse manifest text; raises :class:`ManifestError` with every load-level problem."""
    try:
        check_events(text, display_path)
        root = compose(text)
    except ManifestError:
        raise
    except MarkedYAMLError as exc:
        raise _syntax_error(exc, display_path) from None
    except YAMLError as exc:
        raise _syntax_error(exc, display_path) from None
    except RecursionError:
        raise _file_error(
            "DPONE_MANIFEST_YAML_TOO_DEEP",
            "the manifest nests too deep to parse",
            display_path,
            "flatten the structure",
        ) from None
    if root is None:
        raise _file_error(
            "DPONE_MANIFEST_NOT_MAPPING",
            "the manifest is empty",
            display_path,
            "start from an example in manifests_examples/",
        )
    converter = NodeConverter(display_path)
    try:
        document = converter.convert(root, "", 1)
    except Abort as abort:
        line = abort.node.start_mark.line + 1 if abort.node is not None else None
        column = abort.node.start_mark.column + 1 if abort.node is not None else None
        detail = ErrorDetail(
            code=abort.code,
            message=abort.message,
            stage="load",
            pointer=abort.pointer,
            path=display_path,
            line=line,
            column=column,
            fixes=(abort.fix,),
        )
        raise ManifestError.collect([detail], display_path) from None
    if converter.errors:
        raise ManifestError.collect(converter.errors, display_path)
    if not isinstance(document, dict):
        raise ManifestError.collect(
            [
                ErrorDetail(
                    code="DPONE_MANIFEST_NOT_MAPPING",
                    message="the manifest's top level must be a mapping of keys",
                    stage="load",
                    pointer="",
                    path=display_path,
                    line=root.start_mark.line + 1,
                    column=root.start_mark.column + 1,
                    fixes=("start with `name:`, `source:` and `sink:` keys",),
                )
            ],
            display_path,
        )
    marks = dict(converter.marks)
    marks[""] = value_mark(root)
    return LoadedManifest(path=path, display_path=display_path, document=document, marks=marks)


def load_manifest(path: str | Path) -> LoadedManifest:
    """Read and parse the manifest at ``path`` (the only IO of the compiler)."""
    p = Path(path)
    display = str(path)
    return parse_manifest(read_manifest_text(p, display), path=p.resolve(), display_path=display)
