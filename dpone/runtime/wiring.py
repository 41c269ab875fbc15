"""The component wiring: a compiled plan becomes the objects a run (and a replay) talks to.

``plan`` → its source, its sink, its DLQ store, its state store, its run journal, its evidence
output, and fresh contract enforcers and assertion engines. Building them connects to
nothing and reads no data, but it is where a manifest's secrets are resolved and its
connectors configured, so every problem found here is a preflight problem (exit 2, nothing
read). The run (``runtime/lifecycle.py``) and the replay executor (``ops/replay/binding.py``)
both build their parts here, so they bind a manifest the same way.

A source or a sink may be injected instead of the manifest's (``dpone.testing``'s in-memory
ones): the manifest's connection of an injected one is then never resolved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone import durable
from dpone.assertions.engine import AssertionEngine
from dpone.clock import Clock
from dpone.connectors.base import Sink, Source
from dpone.connectors.sinks import make_sink
from dpone.connectors.sources import make_source
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.dlq.store import DlqStore
from dpone.evidence.writer import EVIDENCE_FILE, bundle_dir, publish_evidence_doc
from dpone.manifest.plan import Plan
from dpone.manifest.secrets import SecretRef, require
from dpone.records import frozen
from dpone.runtime.children import run_enforcer
from dpone.runtime.journal import RunJournal
from dpone.state.store import StateStore

#: Folders of the work dir that only some runs create (a scale-out run, a dlt sink).
OTHER_WORK_FOLDERS = ("scaleout", "dlt")


@frozen
class Paths:
    """Where a run keeps its files. The work dir is the user's (it may be a link, followed
    once); every folder dpone keeps below it is opened without following links
    (:func:`dpone.durable.open_below`). A DLQ or evidence folder the manifest puts outside
    the work dir is its own anchor: the user chose it, so it may be a link too."""

    work_dir: Path
    runs_dir: Path
    state_dir: Path
    dlq_dir: Path
    evidence_dir: Path

    @classmethod
    def of(cls, plan: Plan) -> Paths:
        work = plan.runtime.work_dir
        return cls(
            work_dir=work,
            runs_dir=work / "runs",
            state_dir=work / "state",
            dlq_dir=Path(plan.sink.dlq.directory),
            evidence_dir=plan.sink.evidence_dir,
        )

    def anchor(self, folder: Path) -> Path:
        """The folder links are followed up to: the work dir for a folder below it, else the
        folder itself."""
        return self.work_dir if durable.parts_below(self.work_dir, folder) else folder

    def check_owned(self) -> None:
        """Refuse, before anything is written, a link (or a file) where one of dpone's
        folders belongs (:class:`~dpone.errors.PathIsSymlink`); missing folders are fine."""
        folders = [self.runs_dir, self.state_dir, self.dlq_dir, self.evidence_dir]
        folders += [self.work_dir / name for name in OTHER_WORK_FOLDERS]
        for folder in folders:
            durable.check_below(self.anchor(folder), folder)


def relative(path: Path, base: Path) -> str:
    """For reports and evidence: never an absolute path when the manifest's folder will do."""
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path.name


@frozen
class EvidenceOutput:
    """Where a pipeline's evidence bundles are published (create-only, never overwritten)."""

    directory: Path
    pipeline: str
    #: links are followed up to here, never below (see :meth:`Paths.anchor`)
    anchor: Path | None = None

    def bundle(self, run_id: str) -> Path:
        return bundle_dir(self.directory, self.pipeline, run_id)

    def exists(self, run_id: str) -> bool:
        bundle = self.bundle(run_id)
        durable.check_below(self.anchor or self.directory, bundle)
        return os.path.lexists(bundle / EVIDENCE_FILE)

    def publish(self, doc: dict[str, Any], *, exist_ok: bool = False) -> Path:
        """Publish ``doc``; ``exist_ok``: the identical bundle already published is fine."""
        return publish_evidence_doc(self.directory, doc, exist_ok=exist_ok, anchor=self.anchor)


def connectors(
    plan: Plan,
    env: Mapping[str, str],
    clock: Clock,
    *,
    source: Source | None = None,
    sink: Sink | None = None,
) -> tuple[Source, Sink]:
    """The plan's source and sink (or the injected ones); secrets resolve in the factories.

    Every variable the manifest's own connectors reference is checked first, all at once: a
    dlt-backed source resolves its references only when it is read, which is too late for a
    configuration error (the run would have begun and written its evidence).
    """
    own: list[SecretRef | None] = []
    if source is None:
        own += [plan.source.connection, *plan.source.secrets]
    if sink is None:
        own.append(plan.sink.connection)
    require(own, env)
    if source is None:
        source = make_source(plan.source.spec, env=env, read_all_as_text=True)
    if sink is None:
        sink = make_sink(plan.sink.spec, env=env, clock=clock)
    return source, sink


def dlq_store(plan: Plan, clock: Clock, directory: Path | None = None) -> DlqStore:
    """The plan's DLQ store (``directory``: another root than ``dlq.directory``, the user's
    own choice and so followed if it is a link)."""
    root = directory if directory is not None else Path(plan.sink.dlq.directory)
    return DlqStore(
        root,
        plan.sink.dlq,
        clock=clock,
        environment=plan.environment,
        anchor=Paths.of(plan).anchor(root) if directory is None else None,
    )


def journal(plan: Plan) -> RunJournal:
    """The pipeline's lock and run journal (runs and replays of a pipeline never overlap)."""
    return RunJournal(Paths.of(plan).runs_dir, plan.name, anchor=plan.runtime.work_dir)


def enforcer(plan: Plan) -> ContractEnforcementService:
    """A fresh enforcer of the plan's contract (it learns inferred types as it reads); with
    child tables, of the root table's columns."""
    return run_enforcer(plan)


def assertion_engine(plan: Plan) -> AssertionEngine:
    """A fresh engine of the plan's assertions (imports their predicates: user code)."""
    return AssertionEngine(plan.quality.assertions, plan.manifest_dir)


@frozen
class Components:
    """Everything one run of a plan talks to; ``dlq`` is None under ``dlq.enabled: false``."""

    plan: Plan
    paths: Paths
    source: Source
    sink: Sink
    dlq: DlqStore | None
    states: StateStore
    journal: RunJournal
    evidence: EvidenceOutput

    def enforcer(self) -> ContractEnforcementService:
        return enforcer(self.plan)

    def assertion_engine(self) -> AssertionEngine:
        return assertion_engine(self.plan)


def wire(
    plan: Plan,
    *,
    env: Mapping[str, str],
    clock: Clock,
    source: Source | None = None,
    sink: Sink | None = None,
) -> Components:
    """The components of a run of ``plan``; ``source``/``sink`` replace the manifest's."""
    paths = Paths.of(plan)
    source, sink = connectors(plan, env, clock, source=source, sink=sink)
    # `dlq.enabled: false` (refused wherever a row may be dead-lettered) means no DLQ files.
    store = dlq_store(plan, clock) if plan.sink.dlq.enabled else None
    return Components(
        plan=plan,
        paths=paths,
        source=source,
        sink=sink,
        dlq=store,
        states=StateStore(paths.state_dir, anchor=paths.anchor(paths.state_dir)),
        journal=journal(plan),
        evidence=EvidenceOutput(
            paths.evidence_dir, plan.name, anchor=paths.anchor(paths.evidence_dir)
        ),
    )


__all__ = [
    "Components",
    "EvidenceOutput",
    "Paths",
    "assertion_engine",
    "connectors",
    "dlq_store",
    "enforcer",
    "journal",
    "relative",
    "wire",
]
