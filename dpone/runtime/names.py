"""Column names as a run uses them: the source's, exactly as written, under one rule.

The rule (``dpone/contracts/names.py``): a contract column's ``source:`` renames a source
column, an empty name becomes ``column_<position>``, and names equal but for the letter case
of A-Z are refused (``DPONE_SOURCE_COLUMN_NAME_COLLISION``). Every chunk of a run, a scale-out
task and a replay goes through :meth:`SourceNames.chunk` before anything else sees it, so
the contract, the sink, the evidence, ``schema_changes``, the DLQ records and every message
name a column the same way, as written.

Column names are schema, not data, and are shown as they are. The one case where a name is a
row's value is a CSV file without its header row read with ``header: true``: its first row
becomes the names. Such a header is refused before anything of the file is used
(``DPONE_SOURCE_HEADER_LOOKS_LIKE_DATA``), without quoting a name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import SourceColumnNameCollision, SourceHeaderLooksLikeData
from dpone.contracts.names import Renamed, fold, header_problem, name_columns
from dpone.contracts.spec import ContractSpec
from dpone.manifest.plan import Plan
from dpone.manifest.specs import FileSourceSpec

_NOT_RENAMED: tuple[str, ...] = ()


class SourceNames:
    """Applies the naming rule to a run's source chunks and remembers what it renamed.

    ``csv_header``: the source is a CSV file source with ``header: true`` (its first chunk of
    each file is checked for a header that is a data row)."""

    def __init__(self, contract: ContractSpec, *, csv_header: bool = False) -> None:
        self.renames = {c.source: c.name for c in contract.columns if c.source is not None}
        self.declared = frozenset(contract.column_names) | frozenset(self.renames)
        self.csv_header = csv_header
        self._names: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._checked: set[str] = set()
        self._renamed: dict[Renamed, None] = {}
        #: the sink table's columns by their folded name (see :meth:`against`)
        self._sink: dict[str, str] = {}

    @classmethod
    def of(cls, plan: Plan) -> SourceNames:
        """The names of ``plan``'s source."""
        spec = plan.source.spec
        csv = isinstance(spec, FileSourceSpec) and spec.format == "csv" and spec.csv.header
        return cls(plan.sink.contract, csv_header=csv)

    @property
    def renamed(self) -> tuple[Renamed, ...]:
        """Every source column renamed so far, in the order first seen."""
        return tuple(self._renamed)

    def against(self, existing: Sequence[str]) -> None:
        """The sink table's column names, read before the first chunk: a source name equal
        to one of them but for the case of A-Z is refused as two source names are (DuckDB
        would load it into that column, PostgreSQL would add a second one)."""
        self._sink = {fold(name): name for name in existing}
        self._names.clear()

    def see(self, renamed: tuple[Renamed, ...]) -> None:
        """Add renames another process made (a scale-out task's)."""
        self._renamed.update(dict.fromkeys(renamed))

    def chunk(self, chunk: SourceChunk) -> SourceChunk:
        """``chunk`` with its columns named by the rule (the same object when none changes)."""
        names = tuple(chunk.batch.schema.names)
        if not names:
            return chunk
        if self.csv_header and chunk.first_row == 1 and chunk.partition not in self._checked:
            self._checked.add(chunk.partition)
            self._check_header(chunk)
        new = self._names.get(names)
        if new is None:
            new = self._name(names, chunk.partition)
        if new is _NOT_RENAMED:
            return chunk
        return dataclasses.replace(chunk, batch=chunk.batch.rename_columns(list(new)))

    def _name(self, names: tuple[str, ...], partition: str) -> tuple[str, ...]:
        naming = name_columns(names, self.renames)
        if naming.collisions:
            raise _collision(names, naming.names, naming.collisions[0], partition)
        for position, name in enumerate(naming.names, 1):
            held = self._sink.get(fold(name))
            if held is not None and held != name:
                raise _table_collision(names[position - 1], name, position, held, partition)
        self._renamed.update(dict.fromkeys(naming.renamed))
        new = naming.names if naming.renamed else _NOT_RENAMED
        self._names[names] = new
        return new

    def _check_header(self, chunk: SourceChunk) -> None:
        batch = chunk.batch
        first = None
        if batch.num_rows:
            row = batch.slice(0, 1).to_pylist()[0]
            first = [None if v is None else str(v) for v in row.values()]
        problem = header_problem(batch.schema.names, first, self.declared)
        if problem is not None:
            raise SourceHeaderLooksLikeData(
                f"{chunk.partition}: {problem}; the file looks like it has no header row "
                "(its first row would become the column names, so none is shown)",
                path=chunk.partition,
                line=1,
                fixes=(
                    "set source.options.csv.header: false when the files have no header row",
                    "or, when these are the real names, declare those columns under "
                    "schema_contract.columns",
                ),
            )


def _collision(
    written: tuple[str, ...], names: tuple[str, ...], group: tuple[int, ...], partition: str
) -> SourceColumnNameCollision:
    def shown(p: int) -> str:
        source, name = written[p - 1], names[p - 1]
        if source == name:
            return f"{source!r} (column {p})"
        return f"{source!r} (column {p}, named {name!r})"

    where = f"{partition}: " if partition else ""
    columns = ", ".join(shown(p) for p in group)
    return SourceColumnNameCollision(
        f"{where}the source columns {columns} would be one column in the sink: names that "
        "differ only in the letter case of A-Z are one name to DuckDB, so dpone refuses them "
        "on every sink",
        path=partition or None,
        fixes=(
            "rename one of them in the contract, e.g. "
            f"columns: {{{names[group[-1] - 1].lower()}_2: {{source: {written[group[-1] - 1]!r}, "
            "type: string}}",
        ),
    )


def _table_collision(
    written: str, name: str, position: int, held: str, partition: str
) -> SourceColumnNameCollision:
    where = f"{partition}: " if partition else ""
    shown = f"{written!r}" + (f" (named {name!r})" if written != name else "")
    return SourceColumnNameCollision(
        f"{where}the source column {shown} (column {position}) and the table's column "
        f"{held!r} differ only in the letter case of A-Z: one name to DuckDB, two to "
        "PostgreSQL, so dpone refuses them on every sink",
        path=partition or None,
        fixes=(
            f"load it into the table's column: columns: {{{held}: {{source: {written!r}, "
            "type: ...}}",
            "or give it a name of its own the same way",
        ),
    )


__all__ = ["SourceNames"]
