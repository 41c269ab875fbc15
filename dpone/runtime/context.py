"""What a run is given (:class:`RunOptions`) and what it fixes at its start (:class:`RunContext`).

Both are frozen: the run's identity, paths and options never change while it runs, so every
part of the run (the stream, the DLQ pipe, recovery, the outcome) may read them from any
thread. The one mutable helper a context carries, :class:`~dpone.runtime.names.SourceNames`,
is used by the run's main thread only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import field

import pyarrow as pa

from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import LoadSpec, Sink, Source
from dpone.errors import ConfigError, UsageError
from dpone.ids import UlidSequence, is_identifier
from dpone.manifest.plan import Plan
from dpone.records import frozen
from dpone.runtime import environment
from dpone.runtime.children import normalize_of
from dpone.runtime.identity import RunIdentity
from dpone.runtime.interrupts import InterruptWatch
from dpone.runtime.names import SourceNames
from dpone.runtime.report import RowCounts
from dpone.runtime.wiring import Paths

_PIPELINE_NAME = re.compile(r"[a-z0-9_]{3,64}")


@frozen
class RunOptions:
    """What a caller gives a run besides its plan, each optional: its id, environment, clock,
    progress callback, signal handling, and a source or sink to use instead of the manifest's."""

    run_id: str | None = None
    env: Mapping[str, str] = field(default_factory=environment)
    clock: Clock = utc_now
    #: called on the run's thread after every chunk, and once more when every DLQ record of
    #: the run is durable, with the counts so far (a ``RunProgress``: bytes too, if known)
    progress: Callable[[RowCounts], None] | None = None
    #: the caller's watch of SIGINT/SIGTERM, already started (the CLI starts it before the
    #: compile); without one the run watches the signals itself while it runs
    interrupts: InterruptWatch | None = None
    #: without ``interrupts``: whether the run installs its own SIGINT/SIGTERM watch while it
    #: runs (the default) or leaves the process's handlers alone (a library call, ``dpone.run``)
    watch_signals: bool = True
    #: a source and a sink to use instead of the manifest's (``dpone.testing``'s in-memory
    #: ones); the manifest's connection of an injected one is then never resolved
    source: Source | None = None
    sink: Sink | None = None


@frozen
class RunContext:
    """The identity of one run, fixed before anything is written."""

    plan: Plan
    options: RunOptions
    identity: RunIdentity
    #: ``time.perf_counter()`` at the start, for the run's duration
    started: float
    paths: Paths
    #: how the run names the source's columns (as written, under one rule)
    names: SourceNames
    interrupts: InterruptWatch
    #: whether the run starts and stops ``interrupts`` itself
    owns_watch: bool

    @classmethod
    def start(cls, plan: Plan, options: RunOptions) -> RunContext:
        # Run ids and pipeline names become folder names (evidence, DLQ, staging): checked
        # whole, before anything is written anywhere. A leading '-' is refused too: such an
        # id, as a folder name, reads as an option to any shell tool an operator runs on it.
        if options.run_id is not None and (
            not is_identifier(options.run_id) or options.run_id.startswith("-")
        ):
            raise UsageError(
                "--run-id must be 1 to 128 characters of [A-Za-z0-9._-], not starting with "
                "'.' or '-'",
                fixes=("use a run id such as nightly-2026-01-31, or leave it out for a ULID",),
            )
        if not _PIPELINE_NAME.fullmatch(plan.name):
            raise ConfigError(
                "the manifest name must be 3 to 64 characters of [a-z0-9_]",
                code="DPONE_MANIFEST_PATTERN",
                fixes=("rename the pipeline (name:) to lowercase letters, digits and _",),
            )
        clock = options.clock
        started = time.perf_counter()
        run_id, load_id = UlidSequence().batch(2, clock())
        return cls(
            plan=plan,
            options=options,
            identity=RunIdentity(
                pipeline=plan.name,
                run_id=options.run_id or run_id,
                load_id=load_id,
                started_at=iso_utc(clock()),
            ),
            started=started,
            paths=Paths.of(plan),
            names=SourceNames.of(plan),
            interrupts=options.interrupts or InterruptWatch(),
            # An unstarted watch never reports a signal: with watch_signals off, check() is a
            # no-op.
            owns_watch=options.interrupts is None and options.watch_signals,
        )

    @classmethod
    def of_task(cls, plan: Plan, identity: RunIdentity, env: Mapping[str, str]) -> RunContext:
        """A run already started elsewhere, as a scale-out task sees it: its identity, no
        signal handling (the driver's process owns the signals)."""
        return cls(
            plan=plan,
            options=RunOptions(run_id=identity.run_id, env=env, watch_signals=False),
            identity=identity,
            started=time.perf_counter(),
            paths=Paths.of(plan),
            names=SourceNames.of(plan),
            interrupts=InterruptWatch(),
            owns_watch=False,
        )

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def load_id(self) -> str:
        return self.identity.load_id

    @property
    def started_at(self) -> str:
        return self.identity.started_at

    @property
    def clock(self) -> Clock:
        return self.options.clock

    def now(self) -> str:
        return iso_utc(self.options.clock())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def target(self) -> str:
        """``dataset.table`` of the sink."""
        return f"{self.plan.sink.dataset}.{self.plan.sink.table}"

    def load_spec(self, schema: pa.Schema) -> LoadSpec:
        """The load's identity and strategy; its cursor is given at commit, once it is known."""
        strategy, identity = self.plan.sink.strategy, self.identity
        scd2 = strategy.merge_strategy == "scd2"
        return LoadSpec(
            pipeline=identity.pipeline,
            run_id=identity.run_id,
            load_id=identity.load_id,
            schema=schema,
            mode=strategy.mode,
            unique_key=strategy.unique_key,
            merge_strategy=strategy.merge_strategy or "upsert",
            merge_key=strategy.merge_key,
            deleted_column=strategy.deleted_column,
            # scd2 versions open at the boundary, or when the run started: a rerun of a
            # killed run (a new run) opens them at its own start.
            valid_at=(strategy.boundary() or identity.started()) if scd2 else None,
            load_columns=self.plan.sink.load_columns,
            child_tables=normalize_of(self.plan) is not None,
        )


__all__ = ["RunContext", "RunOptions", "environment"]
