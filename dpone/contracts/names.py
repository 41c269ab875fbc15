"""How a source column's name becomes the name the contract, the sink and every artifact use.

A name is used exactly as the source wrote it (a CSV header, a JSON key, a table's column):
spaces, non-ASCII letters and letter case included. Where a sink cannot hold a name, one rule
applies, the same on every sink and on every run, so a table loaded once takes the next load:

1. a contract column with ``source: <name>`` takes the source column of that name, as
   written, under the contract's name (the way to rename any source column);
2. an empty name (R writes one for its row names) becomes ``column_<position>``, the 1-based
   position of the column in the source (its header);
3. two names equal when the letters A-Z are folded to lower case (``p95`` and ``P95``) are
   refused: DuckDB matches identifiers that way, and a rule that held both on PostgreSQL but
   not on DuckDB would make the same manifest load differently by sink.

Pure: no Arrow, no IO. The compiler applies the rule to the declared names, the runtime to
every source batch (``dpone/runtime/names.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dpone.records import frozen

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """``name`` with A-Z folded to lower case: two names that fold alike are one to DuckDB."""
    return name.translate(_ASCII_LOWER)


def positional(position: int) -> str:
    """The name an empty source column name becomes (``position`` is 1-based)."""
    return f"column_{position}"


@frozen
class Renamed:
    """One source column the run names otherwise than the source wrote it."""

    position: int  # 1-based, in the source's columns
    source: str  # as written
    name: str  # as the contract, the sink and the artifacts name it
    why: str  # "contract" (a ``source:`` key) or "empty" (rule 2)

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "source": self.source, "name": self.name}


@frozen
class Naming:
    """The names of one source schema under the rule (see the module docstring)."""

    names: tuple[str, ...]
    renamed: tuple[Renamed, ...]
    #: groups of 1-based positions whose names fold alike (rule 3), each group sorted
    collisions: tuple[tuple[int, ...], ...]


def name_columns(names: Sequence[str], renames: Mapping[str, str]) -> Naming:
    """The rule applied to a source's column ``names``; ``renames`` maps a contract column's
    ``source`` to its name.

    A name repeated exactly as written and renamed by nothing is not a collision here: the
    contract engine refuses it as a duplicate column, as it always has."""
    out: list[str] = []
    renamed: list[Renamed] = []
    for position, name in enumerate(names, 1):
        if name in renames:
            new, why = renames[name], "contract"
        elif name == "":
            new, why = positional(position), "empty"
        else:
            out.append(name)
            continue
        out.append(new)
        if new != name:
            renamed.append(Renamed(position, name, new, why))
    touched = {r.position for r in renamed}
    groups: dict[str, list[int]] = {}
    for position, name in enumerate(out, 1):
        groups.setdefault(fold(name), []).append(position)
    collisions = tuple(
        tuple(group)
        for group in groups.values()
        if len(group) > 1
        and (len({out[p - 1] for p in group}) > 1 or any(p in touched for p in group))
    )
    return Naming(tuple(out), tuple(renamed), collisions)


# --- a header row that is a data row ----------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{2,4}|\d{4}/\d{1,2}/\d{1,2}")
_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?")
_OFFSET = re.compile(r"(?:Z|z|[+-]\d{2}(?::?\d{2})?)?")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _timestamp(text: str) -> bool:
    for sep in ("T", "t", " "):
        date, found, rest = text.partition(sep)
        if found and _DATE.fullmatch(date):
            clock = re.match(_TIME, rest)
            return clock is not None and _OFFSET.fullmatch(rest[clock.end() :]) is not None
    return False


def value_like(name: str) -> bool:
    """Whether a header name reads as a value: a number, a date, a time or timestamp, an
    e-mail address. A header with one is most likely a data row (the file has no header)."""
    text = name.strip()
    return bool(
        _NUMBER.fullmatch(text)
        or _DATE.fullmatch(text)
        or _TIME.fullmatch(text)
        or _EMAIL.fullmatch(text)
        or _timestamp(text)
    )


def shape(text: str) -> str:
    """A value's shape: each digit ``9``, each letter ``a``, anything else itself."""
    return "".join("9" if c.isdigit() else "a" if c.isalpha() else c for c in text.strip())


def header_problem(
    names: Sequence[str], first_row: Sequence[str | None] | None, declared: frozenset[str]
) -> str | None:
    """Why ``names`` (a CSV header) look like a data row, in words that quote none of them,
    or None. Declared names (or declared ``source`` names) are the user's word: never data.
    ``first_row`` is the first data row's values as text (None: the file has no data row);
    two or more names of the same shape as their column's first value, a shape of three or
    more characters holding a digit (``AB-12`` and ``CD-34``), are a second data row."""
    undeclared = [(i, n) for i, n in enumerate(names, 1) if n not in declared]
    like = [i for i, n in undeclared if value_like(n)]
    if like:
        return f"the header's name(s) at position(s) {_positions(like)} read as values"
    if first_row is None:
        return None
    same = [i for i, n in undeclared if i <= len(first_row) and _same_shape(n, first_row[i - 1])]
    if len(same) >= 2:
        return (
            f"the header's names at positions {_positions(same)} have the shapes of the first "
            "data row's values"
        )
    return None


def _same_shape(name: str, value: str | None) -> bool:
    if value is None:
        return False
    form = shape(name)
    # Short shapes (``q1`` over ``a1``) say too little to call a header a data row.
    return len(form) >= 3 and "9" in form and form == shape(value)


def _positions(positions: Sequence[int], limit: int = 10) -> str:
    text = ", ".join(str(p) for p in positions[:limit])
    return text + (f" and {len(positions) - limit} more" if len(positions) > limit else "")
