"""A run's child tables (``source.normalize: {nested: child_tables}``, SPEC §13): each chunk's
lists of objects unnested (``contracts/nested.py``), each child table enforced under its own
contract, a bad child value rejecting its ROOT row (one DLQ record, the root's record ref, the
reason naming the path column), and the rows of the root rows that load handed to the sink's
load with the ids that link them (dlt's layout, with dpone's names):

- ``_dpone_id``: a root row's is a digest of its record ref (a re-run of the same file gives
  the same ids); a child row's a digest of its parent's id, its field and its list position;
- ``_dpone_parent_id``, ``_dpone_list_idx``, ``_dpone_root_id`` on every child row.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.errors import SinkConfigError
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.nested import (
    PATH_SEP,
    Path,
    Unnested,
    child_contract,
    declared_paths,
    root_contract,
    table_name,
    unnest,
)
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import TABLE_SCOPE, EnforcementResult, Hit, Rejects
from dpone.evidence.model import SchemaChange, schema_changes
from dpone.manifest.plan import Plan

ID, PARENT_ID, LIST_IDX, ROOT_ID = (
    "_dpone_id",
    "_dpone_parent_id",
    "_dpone_list_idx",
    "_dpone_root_id",
)
#: hex digits of a ``_dpone_id`` (80 bits of a sha256)
ID_HEX = 20
#: the deepest child tables when ``max_nesting`` is not given (the schema's maximum)
MAX_NESTING = 32


def normalize_of(plan: Plan) -> dict[str, Any] | None:
    """The manifest's ``source.normalize`` when it asks for child tables."""
    normalize = plan.document.get("source", {}).get("normalize")
    if isinstance(normalize, dict) and normalize.get("nested") == "child_tables":
        return normalize
    return None


def run_enforcer(plan: Plan) -> ContractEnforcementService:
    """The root table's enforcer: with child tables, the columns declared by path are the
    child tables' and not the root's."""
    contract = plan.sink.contract
    return ContractEnforcementService(root_contract(contract) if normalize_of(plan) else contract)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_HEX]


@dataclass(slots=True)
class Judged:
    """One chunk's child tables after their contracts: per path the rows that passed (typed)
    and their rows in the unnested chunk."""

    nested: Unnested
    valid: dict[Path, tuple[pa.RecordBatch, list[int]]]


class ChildTables:
    """The child tables of one run: their enforcers (inference fixed per table for the run) and
    the sink's tables as they were before it (``evolution.tables`` acts on each)."""

    def __init__(
        self,
        plan: Plan,
        normalize: dict[str, Any],
        existing: Callable[[str], pa.Schema | None],
    ) -> None:
        self._contract = plan.sink.contract
        self._table = plan.sink.spec.table
        self._dataset = plan.sink.dataset
        self._max = int(normalize.get("max_nesting", MAX_NESTING))
        self._declared = declared_paths(self._contract)
        self._keep = frozenset(root_contract(self._contract).column_names)
        self._existing_of = existing
        self._enforcers: dict[Path, ContractEnforcementService] = {}
        self._existing: dict[Path, pa.Schema | None] = {}
        #: per child table: the columns this run staged (in order) and its rows
        self._written: dict[Path, dict[str, pa.Field]] = {}
        self._staged: dict[Path, int] = {}

    @classmethod
    def of(cls, plan: Plan, sink: object) -> ChildTables | None:
        normalize = normalize_of(plan)
        if normalize is None:
            return None
        existing = getattr(sink, "child_schema", None)
        if existing is None:  # the compiler allows child tables only into sinks that have them
            raise SinkConfigError("this sink cannot load child tables (source.normalize)")
        return cls(plan, normalize, existing)

    def split(self, batch: pa.RecordBatch) -> Unnested:
        return unnest(batch, max_nesting=self._max, declared=self._declared, keep=self._keep)

    def judge(
        self, nested: Unnested, result: EnforcementResult
    ) -> tuple[Judged, EnforcementResult]:
        """Enforce every child table of the chunk; the root result with the root rows of bad
        child values (and of child fields that are not lists of objects) rejected too. A
        strict contract's violation in a child table fails the run as the root's would."""
        n = nested.root.num_rows
        hits: list[Hit] = []
        counts: dict[tuple[str, ReasonCode], int] = {}
        expected: dict[str, str] = {}
        actual: dict[str, str] = {}
        valid: dict[Path, tuple[pa.RecordBatch, list[int]]] = {}
        for path, rows in nested.children.items():
            child = self._enforcer(path).enforce(rows.batch, existing_schema=self._schema(path))
            child.raise_for_failure()
            valid[path] = (child.valid, child.valid_positions.to_pylist())
            prefix = PATH_SEP.join(path)
            for column, code, mask in child.rejects.hits:
                named = prefix if column == TABLE_SCOPE else f"{prefix}{PATH_SEP}{column}"
                roots = [rows.root[i] for i in pc.indices_nonzero(mask).to_pylist()]
                hits.append((named, code, _mask(n, roots)))
                counts[(named, code)] = counts.get((named, code), 0) + len(set(roots))
                if column in child.expected_types:
                    expected[named] = child.expected_types[column]
                if column in child.actual_types:
                    actual[named] = child.actual_types[column]
        for pos, named in nested.bad.items():
            hits.append((named, ReasonCode.TYPE_MISMATCH, _mask(n, [pos])))
            key = (named, ReasonCode.TYPE_MISMATCH)
            counts[key] = counts.get(key, 0) + 1
            expected[named] = "a list of objects (child table)"
        judged = Judged(nested, valid)
        if not hits:
            return judged, result
        return judged, _folded(result, hits, counts, expected, actual)

    def rows(
        self, judged: Judged, refs: list[str], kept: list[int]
    ) -> tuple[pa.StringArray, dict[str, pa.RecordBatch]]:
        """The ``_dpone_id`` of the root rows at ``kept`` (positions in the chunk, those that
        load) and the rows of each child table under those roots, with their links.
        ``refs``: the record ref of every root row of the chunk."""
        root_ids = [_digest(ref) for ref in refs]
        ids: dict[Path, list[str]] = {}
        keep = set(kept)
        out: dict[str, pa.RecordBatch] = {}
        for path, rows in judged.nested.children.items():
            parents = root_ids if len(path) == 1 else ids[path[:-1]]
            parent_ids = [parents[p] for p in rows.parent]
            own = ids[path] = [
                _digest(f"{pid}{PATH_SEP}{path[-1]}{PATH_SEP}{i}")
                for pid, i in zip(parent_ids, rows.index, strict=True)
            ]
            batch, positions = judged.valid[path]
            take = [j for j, p in enumerate(positions) if rows.root[p] in keep]
            if not take:
                continue
            at = [positions[j] for j in take]
            chosen = batch.take(pa.array(take, pa.int64()))
            links = {
                ID: pa.array([own[p] for p in at], pa.string()),
                PARENT_ID: pa.array([parent_ids[p] for p in at], pa.string()),
                LIST_IDX: pa.array([rows.index[p] for p in at], pa.int64()),
                ROOT_ID: pa.array([root_ids[rows.root[p]] for p in at], pa.string()),
            }
            written = self._written.setdefault(path, {})
            written.update((f.name, f) for f in chosen.schema if f.name not in written)
            self._staged[path] = self._staged.get(path, 0) + chosen.num_rows
            for name, array in links.items():
                chosen = chosen.append_column(name, array)
            out[table_name(self._table, path)] = chosen
        return pa.array([root_ids[p] for p in kept], pa.string()), out

    def schema_changes(self) -> tuple[SchemaChange, ...]:
        """What this run's load changes in the child tables (``dataset.table``): those it
        creates, the columns it adds to those that were there (as ``schema_changes`` says of
        the root; the link columns are the sink's, as the root's ``_dpone_id`` is)."""
        out: list[SchemaChange] = []
        for path, written in self._written.items():
            name = f"{self._dataset}.{table_name(self._table, path)}"
            out.extend(schema_changes(name, self._schema(path), written))
        return tuple(out)

    def staged(self) -> tuple[tuple[str, int], ...]:
        """Every child table this run staged rows into (``dataset.table``) and how many,
        parents first."""
        return tuple(
            (f"{self._dataset}.{table_name(self._table, p)}", n) for p, n in self._staged.items()
        )

    def _enforcer(self, path: Path) -> ContractEnforcementService:
        found = self._enforcers.get(path)
        if found is None:
            found = self._enforcers[path] = ContractEnforcementService(
                child_contract(self._contract, path)
            )
        return found

    def _schema(self, path: Path) -> pa.Schema | None:
        if path not in self._existing:
            self._existing[path] = self._existing_of(table_name(self._table, path))
        return self._existing[path]


def _mask(n: int, positions: list[int]) -> pa.BooleanArray:
    flags = [False] * n
    for p in positions:
        flags[p] = True
    return pa.array(flags, pa.bool_())


def _folded(
    result: EnforcementResult,
    hits: list[Hit],
    counts: dict[tuple[str, ReasonCode], int],
    expected: dict[str, str],
    actual: dict[str, str],
) -> EnforcementResult:
    """``result`` with the root rows of ``hits`` rejected as well."""
    child = hits[0][2]
    for _, _, mask in hits[1:]:
        child = pc.or_(child, mask)
    old = result.rejects
    mask = child if old.mask is None else pc.or_(old.mask, child)
    keep = pc.invert(child.take(result.valid_positions))
    merged = dict(result.counts)
    for key, count in counts.items():
        merged[key] = merged.get(key, 0) + count
    exp = {**result.expected_types, **expected}
    act = {**result.actual_types, **actual}
    return dataclasses.replace(
        result,
        valid=result.valid.filter(keep),
        rejects=Rejects(mask, (*old.hits, *hits), exp, act),
        counts=merged,
        expected_types=exp,
        actual_types=act,
        warned=None if result.warned is None else result.warned.filter(keep),
    )


__all__ = ["ChildTables", "Judged", "normalize_of", "run_enforcer"]
