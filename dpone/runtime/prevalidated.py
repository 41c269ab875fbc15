"""A prevalidated run (``source.prevalidated: true``): the files are checked, not read.

:class:`PrevalidatedRead` is the :class:`~dpone.runtime.stream.ScaleOut` of the run's stream,
the collaborator that reads the source in the stream's place. It reads no row: before anything
is loaded, every file's footer is checked (``connectors/sources/file/prevalidated.py``:
readable, marked, marked for this contract, exactly its columns and types, no NULL in a NOT
NULL column); the first file that fails fails the run, nothing loaded. Then the files are
handed to the run's one sink load, which reads them itself inside its commit's transaction
with the load marker (DuckDB: ``INSERT ... SELECT FROM read_parquet``; PostgreSQL: the files'
Arrow batches by binary COPY into the load's staging table). Everything after (evidence,
journal, state, recovery of a killed run) is the local run's, unchanged:

    files listed -> each file checked (any failure: the run fails, nothing loaded)
    -> DLQ run closed (no record: nothing was rejected) -> the files staged into one load
    -> the lifecycle's commit, evidence and state

Rows read are the files' rows (their footers), all of them loaded: the producer's mark is its
word that none would have been rejected.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from dpone.assertions.engine import AssertionEngine
from dpone.connectors.sources.file.prevalidated import CHECKS, CheckedFile, check_file
from dpone.contracts.types import sink_schema
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.runtime.context import RunContext
from dpone.runtime.report import RunProgress
from dpone.runtime.stream import Stream, Streamed
from dpone.runtime.wiring import Components
from dpone.state.model import PipelineState

log = get_logger("dpone.run")


class PrevalidatedRead:
    """Checks a prevalidated source's files and stages them whole into the run's load."""

    #: the evidence's section this reader's :meth:`evidence` fills
    section = "prevalidated"

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.fingerprint = ctx.plan.contract_fingerprint
        #: the files that passed every check, in the source's order
        self.files: list[CheckedFile] = []

    def evidence(self) -> dict[str, Any]:
        """The evidence's ``prevalidated`` section (the files checked so far on a failure)."""
        return {
            "contract_fingerprint": self.fingerprint,
            "checks": list(CHECKS),
            "files": [f.to_json() for f in self.files],
        }

    def read(self, stream: Stream) -> Streamed:
        ctx, parts, seconds = self.ctx, stream.parts, stream.seconds
        start = perf_counter()
        stream.staging.open()
        seconds["sink_write"] += perf_counter() - start
        schema = sink_schema(ctx.plan.sink.contract)
        source = parts.source
        files = getattr(source, "files", None)
        if files is None:  # the compiler allows prevalidated on file sources only
            raise TypeError("a prevalidated run needs a file source")
        start = perf_counter()
        for partition, file in files():
            self.files.append(check_file(partition, file.path, schema, self.fingerprint))
            ctx.interrupts.check()
        seconds["read"] += perf_counter() - start
        rows = sum(f.rows for f in self.files)
        tally = stream.tally
        tally.read = tally.loaded = rows
        tally.chunks = len(self.files)
        log.info(
            "prevalidated.checked",
            files=len(self.files),
            rows=rows,
            seconds=round(seconds["read"], 3),
        )
        stream.engine.finalize()  # no assertion is allowed: their verdicts are empty
        start = perf_counter()
        stream.pipe.close()
        seconds["dlq"] += perf_counter() - start
        checkpoint("after_dlq_close")
        if ctx.options.progress is not None:
            ctx.options.progress(RunProgress.of(stream.counts(), bytes_read=1, bytes_total=1))
        start = perf_counter()
        stream.staging.begin_staged([f.path for f in self.files], schema)
        seconds["sink_write"] += perf_counter() - start
        return Streamed(cursor_to=None, unplaced={})


def prevalidated_stream(
    ctx: RunContext, parts: Components, engine: AssertionEngine, state: PipelineState
) -> Stream:
    """The stream of a prevalidated run: the local run's, read by :class:`PrevalidatedRead`."""
    return Stream(ctx, parts, engine, state, scale_out=PrevalidatedRead(ctx))


__all__ = ["PrevalidatedRead", "prevalidated_stream"]
