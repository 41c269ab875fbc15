"""A chunk's rejected rows as DLQ records: their refs, reasons and (as the PII policy allows)
values, handed to the run's DLQ pipe (durable before the DLQ index closes, SPEC §6). A legacy
``quarantine.dir`` manifest exports the same rows with their values first
(:mod:`dpone.runtime.legacy_export`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import SourceDecodeError
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import EnforcementResult
from dpone.dlq.refs import file_line_refs, file_refs, run_row_refs
from dpone.dlq.rejects import rejected_rows
from dpone.faults import checkpoint
from dpone.runtime.context import RunContext
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.dlq_pipe import DlqPipe
from dpone.runtime.legacy_export import RawExport
from dpone.runtime.tally import Tally


class Quarantine:
    """Builds each chunk's DLQ records on the run's main thread and submits them to the pipe;
    counts them in the run's tally."""

    def __init__(self, ctx: RunContext, tally: Tally, pipe: DlqPipe, *, dlq_enabled: bool) -> None:
        self._ctx = ctx
        self._tally = tally
        self._pipe = pipe
        #: ``dlq.enabled: false``: rejected rows are counted as dropped, never written
        self._dlq_enabled = dlq_enabled
        folder = ctx.plan.quarantine_export
        #: the deprecated ``quarantine.dir``: the rows' values exported there too
        self._export = RawExport(folder, ctx.run_id) if folder is not None else None

    def decode_failures(self, chunk: SourceChunk, tracker: CursorTracker) -> None:
        """Lines the source could not decode: dead-lettered under quarantine (the run goes
        on; an incremental pipeline skips the lines a committed run dead-lettered already),
        the run's failure in every other mode. Neither names the line's content."""
        plan = self._ctx.plan
        first = chunk.failures[0]
        if plan.sink.contract.enforcement != "quarantine" or not chunk.file_sha256:
            raise SourceDecodeError(
                f"{chunk.partition}: line {first.line}: {first.what}",
                path=chunk.partition,
                line=first.line,
                fixes=(
                    "fix or remove the line in the file",
                    "or set enforcement: quarantine to dead-letter lines that do not decode "
                    "and load the other rows",
                ),
            )
        failures = tracker.new_failures(chunk)
        self._tally.read += len(chunk.failures)
        self._tally.skipped += len(chunk.failures) - len(failures)
        if not failures:
            return
        lines = [failure.line for failure in failures]
        # The line's text is all there is of the row: preserve keeps it, masked its shape.
        texts = [{"line": failure.text} for failure in failures]
        values = texts if plan.sink.dlq.pii_policy != "reference_only" else None
        refs = file_line_refs(chunk.partition, chunk.file_sha256, lines)
        if self._export is not None:
            reason = str(ReasonCode.DECODE_FAILED)
            self._export.write(refs, [reason] * len(refs), [None] * len(refs), texts)
        self._pipe.submit(
            rejected_rows(
                refs,
                ReasonCode.DECODE_FAILED,
                source_offsets=lines,
                source_partitions=chunk.partition,
                rows=values,
            )
        )
        self._tally.violation("", str(ReasonCode.DECODE_FAILED), len(lines))

    def rows(
        self,
        chunk: SourceChunk,
        positions: pa.Int64Array | None,
        batch: pa.RecordBatch,
        result: EnforcementResult,
        quarantine_mask: pa.BooleanArray | None,
        rules: list[str | None] | None,
    ) -> None:
        """Hand this chunk's rejected rows to the DLQ pipe (durable before the index closes)."""
        ctx, tally = self._ctx, self._tally
        rejects = result.rejects
        contract_rows = len(rejects)
        rule_rows = 0 if quarantine_mask is None else int(pc.sum(quarantine_mask).as_py() or 0)
        if not contract_rows and not rule_rows:
            tally.rows_before += chunk.num_rows
            checkpoint("after_chunk_dlq")
            return
        tally.rejected += contract_rows
        if not self._dlq_enabled:
            # dlq.enabled: false (coerce, warn): the rows are counted, never silently lost;
            # the compiler refuses it wherever else a row would be dead-lettered.
            tally.dropped += contract_rows
            tally.rows_before += chunk.num_rows
            checkpoint("after_chunk_dlq")
            return
        # Whole arrays, taken and concatenated by Arrow: Python touches a rejected row only
        # to build its record, never a valid row or a position one scalar at a time.
        in_batch: pa.Int64Array = rejects.positions
        reasons: list[str] = rejects.reasons.to_pylist()
        columns: list[str | None] = rejects.columns.to_pylist()
        rule_ids: list[str | None] = [None] * contract_rows
        if rule_rows and quarantine_mask is not None and rules is not None:
            flagged = pc.indices_nonzero(quarantine_mask)
            in_batch = pa.concat_arrays([in_batch, result.valid_positions.take(flagged)])
            reasons.extend([ReasonCode.RULE_FAILED.value] * len(flagged))
            columns.extend([None] * len(flagged))
            rule_ids.extend(rules[i] for i in flagged.to_pylist())
        refs, row_numbers = self.refs(chunk, positions, in_batch)
        values = None
        if ctx.plan.sink.dlq.pii_policy != "reference_only" or self._export is not None:
            values = batch.take(in_batch).to_pylist()
        if self._export is not None:
            assert values is not None
            self._export.write(refs, reasons, columns, values)
            if ctx.plan.sink.dlq.pii_policy == "reference_only":
                values = None
        expected = [result.expected_types.get(c) if c else None for c in columns]
        actual = [result.actual_types.get(c) if c else None for c in columns]
        rows = rejected_rows(
            refs,
            reasons,
            columns=columns,
            actual_types=actual,
            expected_types=expected,
            rule_ids=rule_ids,
            source_offsets=row_numbers,
            source_partitions=chunk.partition,
            rows=values,
        )
        self._pipe.submit(rows)
        tally.rows_before += chunk.num_rows

    def refs(
        self,
        chunk: SourceChunk,
        positions: pa.Int64Array | None,
        in_batch: pa.Int64Array | list[int],
    ) -> tuple[list[str], list[int]]:
        """The record refs and source row numbers of rows of the (windowed) batch."""
        ctx = self._ctx
        at = pa.array(in_batch, pa.int64()) if isinstance(in_batch, list) else in_batch
        chunk_rows = at if positions is None else positions.take(at)
        row_numbers: list[int] = pc.add(chunk_rows, chunk.first_row).to_pylist()
        if chunk.rereadable and chunk.file_sha256:
            refs = file_refs(chunk.partition, chunk.file_sha256, row_numbers)
        else:
            before = self._tally.rows_before + 1
            refs = run_row_refs(ctx.run_id, ctx.load_id, pc.add(chunk_rows, before).to_pylist())
        return refs, row_numbers


__all__ = ["Quarantine"]
