"""``record_ref``: how a resolver finds a rejected row again without the DLQ holding its values.

Three forms (SPEC §5):

* ``dpone://file/<path>?sha256=<hex>&row=<n>`` — a row of a file source. ``path`` is the file
  as the manifest's ``source.path`` spells it (:mod:`dpone.sourcepaths`): relative to the
  manifest's folder (``data/a.csv``, ``../shared/a.csv``), absolute (``/data/a.csv``, so the
  ref reads ``dpone://file//data/a.csv``) or under the home folder (``~/landing/a.csv``);
  POSIX separators, percent-encoded. ``sha256`` is the file's digest (a resolver refuses a
  file that changed); ``row`` is the 1-based number of the row among those the reader decoded.
* ``dpone://file/<path>?sha256=<hex>&line=<n>`` — a physical line (1-based, the header is
  line 1) the reader could not decode (``source.decode_failed``). Not replayable: there is
  no row to enforce again.
* ``dpone://runs/<run_id>/loads/<load_id>/rows/<n>`` — a source that cannot be re-read
  (a Python generator, a stream); ``n`` is the 1-based row number within the load.

The leading character of ``path`` tells the three local path forms apart: ``/`` absolute,
``~`` home (a relative path may not start with ``~``), anything else relative. A file read
from an object store is named by its URI, whose scheme and ``://`` stay as they are and whose
bucket and key are percent-encoded like a path:
``dpone://file/s3://bucket/landing/a%20b.csv?sha256=<hex>&row=<n>`` (``sha256`` is the
object's bytes). A local path never reads that way: its ``:`` is always encoded (``%3A``), so
the grammar only grew (every ref valid before is valid and means the same).

The bulk builders format a whole chunk at the cost of one f-string per row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote, unquote

from dpone.dlq.errors import DlqInvalidRef
from dpone.dlq.fsio import check_identifier
from dpone.ids import IDENTIFIER_PATTERN
from dpone.records import frozen
from dpone.sourcepaths import is_object_uri, source_path_problem

REF_PREFIX = "dpone://"
MAX_REF_LENGTH = 4096

_SHA_HEX = re.compile(r"^[0-9a-f]{64}$")
_ID = IDENTIFIER_PATTERN[1:-1]  # the identifier pattern without its anchors
_FILE_REF = re.compile(
    r"^dpone://file/(?P<path>(?:(?:s3|gs|az)://)?[A-Za-z0-9/._~%-]+)"
    r"\?sha256=(?P<sha>[0-9a-f]{64})"
    r"&(?P<unit>row|line)=(?P<row>[1-9][0-9]{0,17})$"
)
_RUN_REF = re.compile(
    rf"^dpone://runs/(?P<run>{_ID})/loads/(?P<load>{_ID})/rows/(?P<row>[1-9][0-9]{{0,17}})$"
)
# Characters left unescaped in the path: the RFC 3986 unreserved set and the separator.
_PATH_SAFE = "/-._~"


@frozen
class FileRef:
    """A row of a file source: ``path`` as the manifest spells it, the file's SHA-256, its row."""

    path: str
    sha256: str
    row: int

    def to_uri(self) -> str:
        return file_ref(self.path, self.sha256, self.row)


@frozen
class FileLineRef:
    """A physical line of a file that the source could not decode (not replayable)."""

    path: str
    sha256: str
    line: int

    def to_uri(self) -> str:
        return file_line_refs(self.path, self.sha256, [self.line])[0]


@frozen
class RunRowRef:
    """A row of a source that cannot be re-read: the run and load that saw it, its row."""

    run_id: str
    load_id: str
    row: int

    def to_uri(self) -> str:
        return run_row_ref(self.run_id, self.load_id, self.row)


def _check_path(path: str) -> str:
    problem = source_path_problem(path, glob=False)
    if problem is not None:
        raise DlqInvalidRef(f"a file record_ref path {problem}")
    return path


def _check_row(row: int) -> int:
    if type(row) is not int or row < 1:
        raise DlqInvalidRef("a record_ref row number is a 1-based integer")
    return row


def _file_prefix(path: str, sha256: str, unit: str = "row") -> str:
    _check_path(path)
    if not _SHA_HEX.match(sha256):
        raise DlqInvalidRef("a file record_ref needs the file's SHA-256 as 64 lowercase hex digits")
    scheme, sep, rest = path.partition("://") if is_object_uri(path) else ("", "", path)
    spelled = scheme + sep + quote(rest, safe=_PATH_SAFE)
    return f"{REF_PREFIX}file/{spelled}?sha256={sha256}&{unit}="


def file_ref(path: str, sha256: str, row: int) -> str:
    """The ``record_ref`` of data row ``row`` (1-based) of the file at ``path``."""
    return _file_prefix(path, sha256) + str(_check_row(row))


def file_refs(path: str, sha256: str, rows: Iterable[int]) -> list[str]:
    """``file_ref`` for many rows of one file (one prefix, one f-string per row)."""
    prefix = _file_prefix(path, sha256)
    return [prefix + str(_check_row(row)) for row in rows]


def file_line_refs(path: str, sha256: str, lines: Iterable[int]) -> list[str]:
    """The ``record_ref`` of physical lines (1-based) of a file that did not decode."""
    prefix = _file_prefix(path, sha256, "line")
    return [prefix + str(_check_row(line)) for line in lines]


def _run_prefix(run_id: str, load_id: str) -> str:
    check_identifier(run_id, "run id")
    check_identifier(load_id, "load id")
    return f"{REF_PREFIX}runs/{run_id}/loads/{load_id}/rows/"


def run_row_ref(run_id: str, load_id: str, row: int) -> str:
    """The ``record_ref`` of row ``row`` (1-based) of a load that cannot be re-read."""
    return _run_prefix(run_id, load_id) + str(_check_row(row))


def run_row_refs(run_id: str, load_id: str, rows: Iterable[int]) -> list[str]:
    prefix = _run_prefix(run_id, load_id)
    return [prefix + str(_check_row(row)) for row in rows]


def parse_ref(ref: str) -> FileRef | FileLineRef | RunRowRef:
    """Parse a ``record_ref``; raise ``DPONE_DLQ_INVALID_REF`` unless it is in canonical form."""
    if not isinstance(ref, str) or len(ref) > MAX_REF_LENGTH:
        raise DlqInvalidRef("a record_ref is a string of at most 4096 characters")
    match = _FILE_REF.fullmatch(ref)
    if match:
        try:
            path = unquote(match["path"], errors="strict")
        except UnicodeDecodeError:
            raise DlqInvalidRef("the record_ref path is not percent-encoded UTF-8") from None
        parsed: FileRef | FileLineRef | RunRowRef
        if match["unit"] == "row":
            parsed = FileRef(path, match["sha"], int(match["row"]))
        else:
            parsed = FileLineRef(path, match["sha"], int(match["row"]))
    else:
        match = _RUN_REF.fullmatch(ref)
        if not match:
            raise DlqInvalidRef("not a dpone record_ref (dpone://file/... or dpone://runs/...)")
        parsed = RunRowRef(match["run"], match["load"], int(match["row"]))
    try:
        canonical = parsed.to_uri()
    except DlqInvalidRef:
        raise DlqInvalidRef("the record_ref names an unsafe path") from None
    if canonical != ref:
        raise DlqInvalidRef("the record_ref is not in canonical form")
    return parsed


def is_valid_ref(ref: object) -> bool:
    """Whether ``ref`` is a canonical ``record_ref`` of either form."""
    if not isinstance(ref, str):
        return False
    try:
        parse_ref(ref)
    except DlqInvalidRef:
        return False
    return True


def has_ref_shape(ref: object) -> bool:
    """The write path's cheap check (one regex): the shape of either form, bounded length.

    The builders above always produce canonical refs; a resolver parses strictly.
    """
    return (
        isinstance(ref, str)
        and len(ref) <= MAX_REF_LENGTH
        and (_FILE_REF.fullmatch(ref) is not None or _RUN_REF.fullmatch(ref) is not None)
    )


# Both forms without their anchors, one per line: a whole chunk's refs in one regex call.
_REF_LINES = re.compile(
    "(?:(?:"
    + re.sub(r"\(\?P<\w+>", "(?:", _FILE_REF.pattern[1:-1])
    + "|"
    + re.sub(r"\(\?P<\w+>", "(?:", _RUN_REF.pattern[1:-1])
    + ")\n)*"
)


def all_have_ref_shape(refs: Sequence[object]) -> bool:
    """:func:`has_ref_shape` of every ref at once (a chunk of rejects): one regex over the
    joined refs, which hold no newline of their own (the count of newlines proves it)."""
    if not all(type(r) is str and len(r) <= MAX_REF_LENGTH for r in refs):
        return False
    joined = "\n".join(refs) + "\n"  # type: ignore[arg-type]
    return joined.count("\n") == len(refs) and _REF_LINES.fullmatch(joined) is not None


def is_replayable(ref: str) -> bool:
    """Only file rows can be resolved again by re-reading the source (a line that did not
    decode has no row to enforce again)."""
    # A canonical path is percent-encoded, so "&row=" can only be the row parameter.
    return ref.startswith(REF_PREFIX + "file/") and "&row=" in ref


__all__ = [
    "MAX_REF_LENGTH",
    "REF_PREFIX",
    "FileLineRef",
    "FileRef",
    "RunRowRef",
    "all_have_ref_shape",
    "file_line_refs",
    "file_ref",
    "file_refs",
    "has_ref_shape",
    "is_replayable",
    "is_valid_ref",
    "parse_ref",
    "run_row_ref",
    "run_row_refs",
]
