"""Re-reading quarantined rows from a manifest's file source, for the first-party replay.

:class:`FileRowResolver` re-reads the quarantined rows from the manifest's file source by their
``record_ref`` (path or object URI, SHA-256, row), through the source's own filesystem layer
(``dpone.connectors.fs``). Every file's SHA-256 is checked before any row is read: one changed
file refuses the whole replay (``DPONE_DLQ_REPLAY_SOURCE_CHANGED``). The rows are then
re-enforced exactly as a run enforces them (the same
:class:`~dpone.contracts.enforcer.ContractEnforcementService`, chunk by chunk as the source
yields them), checked by the manifest's row-scope assertions (one engine for the whole replay,
so ``unique_columns`` catches duplicates among the replayed rows, and a key the target table
already holds keeps its row out), and fitted to the target table's current columns: a value
the target cannot hold without loss (a ``decimal(12,3)`` into a ``DECIMAL(12,2)`` column the
sink would round) keeps the row pending as ``sink.row_rejected`` instead of loading something
else than the source said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dpone.canonical import checksum
from dpone.connectors.base import KeyedSink
from dpone.connectors.batches import conform, position_mask
from dpone.connectors.errors import SinkSchemaError
from dpone.connectors.sources.file import FileSource
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import SchemaFrozen
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import TABLE_SCOPE
from dpone.dlq.model import DlqRecord
from dpone.dlq.refs import FileRef, parse_ref
from dpone.manifest.plan import Plan
from dpone.ops.replay.document import is_valid_identity
from dpone.ops.replay.errors import (
    ReplayRefOutsideSource,
    ReplaySourceChanged,
    ReplayUnsupported,
    RowStillRejected,
)
from dpone.ops.replay.executor import Resolution
from dpone.records import frozen
from dpone.runtime import wiring
from dpone.runtime.names import SourceNames

# --- identities ---------------------------------------------------------------------------------


def bounded_identity(identity: str, prefix: str) -> str:
    """``identity`` when it is a valid identity, else its prefix and a digest of it."""
    if is_valid_identity(identity):
        return identity
    return f"{prefix}:{checksum(identity)[7:39]}"


def resolver_identity(manifest: Plan, source_identity: str) -> str:
    """Where a replay reads rows: the pipeline and its source (format and glob).

    Deliberately not the contract: the identity is part of the plan id and so of every
    idempotency key, and the keys must not change when the contract is fixed once more after
    an interrupted execution, or the retry would load the rows already committed again.
    """
    return bounded_identity(f"dpone-file:{manifest.name}:{source_identity}", "dpone-file")


# --- resolving ----------------------------------------------------------------------------------


@frozen
class _Wanted:
    """A row to re-read from a file: its row number in the file and the record that names it."""

    row: int
    record_id: str


@dataclass(slots=True)
class _Judged:
    """Rows that pass so far (``ids[i]`` is the record of row ``i``) and the rejections."""

    pieces: list[pa.Table]
    ids: list[str]
    rejected: dict[str, RowStillRejected]

    def keep(
        self, piece: pa.Table, ids: Sequence[str], out: Mapping[int, RowStillRejected]
    ) -> None:
        """Keep the rows of ``piece`` not in ``out`` (positions), reject the others."""
        for position, why in out.items():
            self.rejected[ids[position]] = why
        if out:
            mask = position_mask(sorted(out), piece.num_rows)
            piece = piece.filter(pc.invert(mask))
            ids = [record_id for i, record_id in enumerate(ids) if i not in out]
        self.pieces.append(piece)
        self.ids.extend(ids)


class FileRowResolver:
    """Re-reads, re-enforces, re-asserts and fits quarantined rows of a manifest's file source.

    Vectorized like a run: each source chunk is enforced whole, the row-scope assertions
    observe every chunk in one engine (so ``unique_columns`` also catches a duplicate inside
    the replayed rows), and a key of a ``unique_columns`` assertion that the target table
    already holds keeps its row out. Batch-scope assertions (min/max rows) do not apply.
    """

    def __init__(
        self,
        manifest: Plan,
        source: FileSource,
        target: KeyedSink,
        *,
        unique_key: tuple[str, ...] = (),
    ) -> None:
        self.manifest = manifest
        self.source = source
        self.identity = resolver_identity(manifest, source.identity)
        self._target = target
        self._unique_key = unique_key
        # The rows come back named as the run named them (a ``source:`` rename, ``""``).
        self._names = SourceNames.of(manifest)

    def resolve(self, records: Sequence[DlqRecord]) -> Resolution:
        """Check every file's SHA-256, then read, enforce, assert and fit every wanted row."""
        if not records:
            return Resolution(pa.table({}), (), {})
        files = self._files(records)
        for path, (sha, _) in sorted(files.items()):
            self._check_file(path, sha)
        existing = self._target.existing_schema()
        if existing is not None and self.manifest.sink.type != "dlt":
            self._names.against(existing.names)
        enforcer = wiring.enforcer(self.manifest)
        engine = wiring.assertion_engine(self.manifest)
        judged = _Judged([], [], {})
        for path, (sha, wanted) in sorted(files.items()):
            for piece, ids in self._read_rows(path, sha, wanted):
                valid, valid_ids = self._enforce(piece, ids, enforcer, existing, judged)
                _, quarantine, rules = engine.observe(valid, fail_fast=False)
                out: dict[int, RowStillRejected] = {}
                if quarantine is not None and rules is not None:
                    out = {
                        i: RowStillRejected(ReasonCode.RULE_FAILED, rule_id=rule)
                        for i, rule in enumerate(rules)
                        if rule is not None
                    }
                judged.keep(pa.Table.from_batches([valid]), valid_ids, out)
        rows = pa.concat_tables(judged.pieces, promote_options="permissive")
        fitted = _Judged([], [], judged.rejected)
        table, out = fit_to_target(rows, existing, self._unique_key)
        fitted.keep(table, judged.ids, out)
        final = _Judged([], [], judged.rejected)
        final.keep(fitted.pieces[0], fitted.ids, self._keys_in_target(fitted.pieces[0]))
        return Resolution(final.pieces[0], tuple(final.ids), final.rejected)

    def _keys_in_target(self, rows: pa.Table) -> dict[int, RowStillRejected]:
        """Rows whose ``unique_columns`` key the target already holds (a warn policy lets
        them load, as in a run)."""
        out: dict[int, RowStillRejected] = {}
        for spec in self.manifest.quality.assertions:
            if spec.type != "unique_columns" or spec.on_failure == "warn" or not rows.num_rows:
                continue
            columns = [str(c) for c in spec.params["value"] if str(c) in rows.schema.names]
            if not columns:
                continue
            held = self._target.existing_keys(columns, rows.select(columns))
            for position in pc.indices_nonzero(held).to_pylist():
                out.setdefault(
                    position, RowStillRejected(ReasonCode.RULE_FAILED, rule_id=spec.name)
                )
        return out

    # --- reading --------------------------------------------------------------------------------

    def _files(self, records: Sequence[DlqRecord]) -> dict[str, tuple[str, list[_Wanted]]]:
        files: dict[str, tuple[str, list[_Wanted]]] = {}
        for record in records:
            ref = parse_ref(record.record_ref)
            if not isinstance(ref, FileRef):
                raise ReplayUnsupported(
                    f"record {record.record_id} is not a row read from a file; it cannot be re-read"
                )
            if not self.source.matches(ref.path):
                # The ref is input: a record must not make the replay read any file the
                # manifest does not name (another folder, the home folder, /etc).
                raise ReplayRefOutsideSource(
                    f"record {record.record_id} names a file the manifest's source path "
                    f"{self.source.pattern!r} does not match",
                    path=ref.path,
                    fixes=(
                        "replay the run with the manifest whose source read it, or restore "
                        "that source.path",
                    ),
                )
            sha, wanted = files.setdefault(ref.path, (ref.sha256, []))
            if sha != ref.sha256:
                raise ReplaySourceChanged(
                    f"the records name two versions of {ref.path}; at most one can be replayed",
                    path=ref.path,
                )
            wanted.append(_Wanted(ref.row, record.record_id))
        return files

    def _check_file(self, partition: str, sha: str) -> None:
        fixes = (
            "restore the file as it was when the run read it, or rerun the pipeline on the "
            "new file instead of replaying",
        )
        try:
            actual = self.source.resolve(partition).sha256()
        except FileNotFoundError:
            raise ReplaySourceChanged(
                f"{partition} is gone; the records cannot be read again",
                path=partition,
                fixes=fixes,
            ) from None
        except OSError as exc:
            raise ReplaySourceChanged(
                f"{partition} cannot be read ({type(exc).__name__})", path=partition
            ) from None
        if actual != sha:
            raise ReplaySourceChanged(
                f"{partition} changed since the run read it (its SHA-256 differs)",
                path=partition,
                fixes=fixes,
            )

    def _read_rows(
        self, partition: str, sha: str, wanted: list[_Wanted]
    ) -> list[tuple[pa.RecordBatch, list[str]]]:
        """The wanted rows, one piece per source chunk (each enforced as that chunk was)."""
        order = sorted(wanted, key=lambda w: w.row)
        pieces: list[tuple[pa.RecordBatch, list[str]]] = []
        i = 0
        chunk_size = self.manifest.runtime.chunk_size
        for read in self.source.read_file(partition, self.source.resolve(partition), chunk_size):
            chunk = self._names.chunk(read)
            if chunk.file_sha256 != sha:
                raise ReplaySourceChanged(f"{partition} changed while it was read", path=partition)
            end = chunk.first_row + chunk.num_rows
            take: list[int] = []
            ids: list[str] = []
            while i < len(order) and order[i].row < end:
                take.append(order[i].row - chunk.first_row)
                ids.append(order[i].record_id)
                i += 1
            if take:
                pieces.append((chunk.batch.take(pa.array(take, pa.int64())), ids))
            if i == len(order):
                break
        if i < len(order):
            raise ReplaySourceChanged(
                f"{partition} has fewer rows than a record names", path=partition
            )
        return pieces

    # --- judging --------------------------------------------------------------------------------

    def _enforce(
        self,
        piece: pa.RecordBatch,
        ids: list[str],
        enforcer: ContractEnforcementService,
        existing: pa.Schema | None,
        judged: _Judged,
    ) -> tuple[pa.RecordBatch, list[str]]:
        """The rows of ``piece`` the contract accepts; the others go to ``judged.rejected``."""
        result = enforcer.enforce(piece, existing_schema=existing)
        if isinstance(result.error, SchemaFrozen):
            raise result.error  # the contract refuses the target's shape: fix the manifest
        rejects = result.rejects
        for position, reason, column in zip(
            rejects.positions.to_pylist(),
            rejects.reasons.to_pylist(),
            rejects.columns.to_pylist(),
            strict=True,
        ):
            judged.rejected[ids[position]] = RowStillRejected(
                ReasonCode(reason), None if column == TABLE_SCOPE else column
            )
        return result.valid, [ids[p] for p in result.valid_positions.to_pylist()]


def fit_to_target(
    rows: pa.Table, existing: pa.Schema | None, unique_key: tuple[str, ...] = ()
) -> tuple[pa.Table, dict[int, RowStillRejected]]:
    """``rows`` cast to the target's column types, and the positions of the rows the target
    cannot hold as they are (``sink.row_rejected``: a cast would lose data, or a merge key
    is NULL). Columns the target lacks keep the contract's type (the sink adds them)."""
    if existing is None:
        return rows, {}
    fields = []
    for field in rows.schema:
        index = existing.get_field_index(field.name)
        fields.append(field if index < 0 else existing.field(index).with_metadata(field.metadata))
    schema = pa.schema(fields)
    out: dict[int, RowStillRejected] = {}
    for field in schema:
        column = rows.column(field.name).combine_chunks()
        for position in _unfit(column, field, 0):
            out.setdefault(position, RowStillRejected(ReasonCode.SINK_ROW_REJECTED, field.name))
    for key in unique_key:
        if key in schema.names:
            nulls = pc.indices_nonzero(pc.is_null(rows.column(key).combine_chunks()))
            for position in nulls.to_pylist():
                out.setdefault(position, RowStillRejected(ReasonCode.SINK_ROW_REJECTED, key))
    kept = rows.filter(pc.invert(position_mask(sorted(out), rows.num_rows))) if out else rows
    batches = [conform(batch, schema) for batch in kept.to_batches()]
    return pa.Table.from_batches(batches, schema=schema), out


def _unfit(column: pa.Array, field: pa.Field, offset: int) -> list[int]:
    """Positions (from ``offset``) of the values of ``column`` that do not fit ``field``:
    the whole column is tried at once, and halved only where it fails."""
    if not len(column):
        return []
    try:
        conform(pa.RecordBatch.from_arrays([column], names=[field.name]), pa.schema([field]))
        return []
    except SinkSchemaError:
        if len(column) == 1:
            return [offset]
    half = len(column) // 2
    return _unfit(column.slice(0, half), field, offset) + _unfit(
        column.slice(half), field, offset + half
    )


__all__ = ["FileRowResolver", "bounded_identity", "fit_to_target", "resolver_identity"]
