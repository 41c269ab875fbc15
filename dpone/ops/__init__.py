"""The operations planes of SPEC §8 as functions: replay, retention, verify, release gate.

Each is a thin call over the service that does the work, in this package (``replay/``,
``retention/``, ``verification.py`` and ``repair.py``, ``gate/``), and returns
the result object ``dpone ops ...`` renders; every one has a ``to_json()``. Errors follow the
API's contract: a usage or configuration problem (a folder that is not a DLQ store, a bad
policy) raises :class:`~dpone.errors.ConfigError`, other failures their ``DponeError``.
Heavy modules are imported inside the functions: ``import dpone.ops`` stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dpone import logs
from dpone._lazy import exports
from dpone.errors import UsageError

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore
    from dpone.manifest.plan import Plan
    from dpone.ops.gate.report import GateReport
    from dpone.ops.pipeline_changes import DropResult, ResetDecision, ResetResult
    from dpone.ops.pipelines import PipelineInfo, PipelineList
    from dpone.ops.replay.binding import ReplayBinding
    from dpone.ops.replay.document import ReplayPlan
    from dpone.ops.replay.executor import ReplayResult
    from dpone.ops.report_html import OpsReport
    from dpone.ops.retention.model import RetentionPlan, RetentionResult
    from dpone.ops.verification import Verification

PathLike = str | os.PathLike[str]

__getattr__, __dir__ = exports(__name__, {"Verification": "dpone.ops.verification"})

#: What a DLQ root holds at its top (SPEC §5); anything else alone is not a DLQ store.
STORE_FOLDERS = ("runs", "acks")


def open_store(
    directory: PathLike, *, require_signature: bool = False, allow_unsigned: bool = False
) -> DlqStore:
    """The store at ``directory``. A missing folder, or a folder with other things in it but
    neither ``runs/`` nor ``acks/`` (a work dir, the manifest's folder), is a usage error
    (exit 2): verifying it would say "ok" about a store that is not there. An empty folder is
    an empty store (a DLQ root before its first rejected row) and verifies.

    With a signing key configured every index read must be signed (``allow_unsigned`` opts
    out); ``require_signature`` without a key is a usage error."""
    from dpone.dlq.store import DlqStore
    from dpone.signing import required

    require = required(require_signature=require_signature, allow_unsigned=allow_unsigned)
    directory = Path(directory)
    fix = "pass the DLQ root with --dir (dlq.directory, by default <work_dir>/dlq)"
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is not a folder", code="DPONE_DLQ_DIR_NOT_FOUND", fixes=(fix,)
        )
    is_store = any((directory / name).is_dir() for name in STORE_FOLDERS)
    if not is_store and any(directory.iterdir()):
        raise UsageError(
            f"{directory} is not a DLQ store: it has neither runs/ nor acks/",
            code="DPONE_DLQ_NOT_A_STORE",
            fixes=(fix,),
        )
    return DlqStore(directory, require_signature=require)


# --- verify -------------------------------------------------------------------------------------


def verify(
    dlq_dir: PathLike,
    *,
    run_id: str | None = None,
    repair: bool = False,
    require_signature: bool = False,
    allow_unsigned: bool = False,
) -> Verification:
    """Check every checksum, index and acknowledgement of the DLQ store (or of one run);
    ``repair`` first closes abandoned runs and removes crash leftovers. With a signing key
    configured every index must be signed (``allow_unsigned`` opts out); repair never
    rebuilds, and so never signs, an index that does not verify."""
    from dpone.ops.repair import repair_store
    from dpone.ops.verification import Verification, signature_findings, verify_store

    logs.to_stderr()
    store = open_store(dlq_dir, require_signature=require_signature, allow_unsigned=allow_unsigned)
    repaired = repair_store(store, run_id) if repair else []
    findings = verify_store(store, run_id)
    if store.require_signature:
        seen = {(f.code, f.run_id) for f in findings}
        findings += [f for f in signature_findings(store, run_id) if (f.code, f.run_id) not in seen]
    return Verification(os.fspath(dlq_dir), run_id, tuple(findings), tuple(repaired))


# --- replay -------------------------------------------------------------------------------------


def replay_plan(
    run_id: str,
    *,
    dlq_dir: PathLike | None = None,
    manifest: PathLike | Plan | None = None,
    max_items: int | None = None,
    env: Mapping[str, str] | None = None,
    require_signature: bool = False,
    allow_unsigned: bool = False,
) -> ReplayPlan:
    """The replay plan of DLQ run ``run_id``: unbound (read-only) from ``dlq_dir`` alone, or
    bound to ``manifest``'s file source and sink (what :func:`replay_execute` applies). With a
    signing key configured the run's index must be signed (``allow_unsigned`` opts out)."""
    from dpone.ops.replay.document import replay_bound
    from dpone.ops.replay.reading import plan
    from dpone.signing import required

    require = required(require_signature=require_signature, allow_unsigned=allow_unsigned)
    if manifest is None:
        if dlq_dir is None:
            raise UsageError("pass the DLQ root with --dir (or a manifest with --manifest)")
        store = open_store(
            dlq_dir, require_signature=require_signature, allow_unsigned=allow_unsigned
        )
        return plan(store, run_id, max_items=replay_bound(max_items))
    binding = _binding(manifest, run_id, dlq_dir, env)
    binding.store.require_signature = require
    return binding.plan(max_items=max_items)


def replay_execute(
    manifest: PathLike | Plan,
    run_id: str,
    *,
    dlq_dir: PathLike | None = None,
    plan: PathLike | ReplayPlan | None = None,
    max_items: int | None = None,
    env: Mapping[str, str] | None = None,
    require_signature: bool = False,
    allow_unsigned: bool = False,
) -> ReplayResult:
    """Apply the replay of ``run_id`` with the first-party file executor: re-read, re-check
    and load each row once, then acknowledge it. ``plan`` (a file or a plan printed earlier)
    is refused unless it is the plan the store, the manifest and the sink give now. With a
    signing key configured the plan file and the run's index must be signed
    (``allow_unsigned`` opts out)."""
    from dpone.ops.replay.binding import execute_replay
    from dpone.ops.replay.document import load_plan
    from dpone.signing import required

    logs.to_stderr()
    require = required(require_signature=require_signature, allow_unsigned=allow_unsigned)
    binding = _binding(manifest, run_id, dlq_dir, env)
    binding.store.require_signature = require
    stored = (
        load_plan(Path(plan), require_signature=require)
        if isinstance(plan, str | os.PathLike)
        else plan
    )
    return execute_replay(binding, stored, max_items=max_items)


def _binding(
    manifest: PathLike | Plan,
    run_id: str,
    dlq_dir: PathLike | None,
    env: Mapping[str, str] | None,
) -> ReplayBinding:
    from dpone.manifest.compiler import compile_manifest
    from dpone.manifest.plan import Plan
    from dpone.ops.replay.binding import bind

    if dlq_dir is not None:
        open_store(dlq_dir)  # a missing folder is a usage error, as everywhere
    plan = manifest if isinstance(manifest, Plan) else compile_manifest(os.fspath(manifest))
    return bind(plan, run_id, dlq_dir=None if dlq_dir is None else Path(dlq_dir), env=env)


# --- retention ----------------------------------------------------------------------------------


def retention_plan(
    dlq_dir: PathLike,
    *,
    now: datetime | str | None = None,
    include_unacknowledged: bool = False,
    evidence_dirs: Sequence[PathLike] = (),
    output: PathLike | None = None,
    allow_unsigned: bool = False,
) -> RetentionPlan:
    """Mark: decide which records may be deleted (deletes nothing). ``now`` (a datetime with
    a time zone or ISO-8601 text; default: now) judges expiry; ``output`` keeps the plan for
    :func:`retention_apply`. With a signing key configured every index must be signed
    (``allow_unsigned`` opts out) and the plan is signed."""
    from dpone.ops.retention.mark import plan_retention

    store = open_store(dlq_dir, allow_unsigned=allow_unsigned)
    for folder in evidence_dirs:
        if not Path(folder).is_dir():
            raise UsageError(f"--pin-evidence {folder} is not a folder")
    plan = plan_retention(
        store,
        _moment(now),
        include_unacknowledged=include_unacknowledged,
        evidence_dirs=evidence_dirs,
    )
    if output is not None:
        import orjson

        from dpone.durable import replace_atomic

        replace_atomic(
            Path(output), orjson.dumps(plan.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
        )
    return plan


def _moment(now: datetime | str | None) -> datetime:
    from dpone.clock import utc_now

    if now is None:
        return utc_now()
    moment = now
    if isinstance(now, str):
        try:
            moment = datetime.fromisoformat(now)
        except ValueError:
            raise UsageError(
                f"--now {now!r} is not an ISO-8601 time", fixes=("e.g. 2026-03-01T00:00:00Z",)
            ) from None
    assert isinstance(moment, datetime)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UsageError("--now needs a time zone", fixes=("e.g. 2026-03-01T00:00:00Z",))
    return moment


def retention_apply(
    plan: PathLike | RetentionPlan,
    *,
    dlq_dir: PathLike | None = None,
    evidence_dirs: Sequence[PathLike] = (),
    include_unacknowledged: bool = False,
    require_signature: bool = False,
    allow_unsigned: bool = False,
) -> RetentionResult:
    """Sweep: refuse if the store drifted from ``plan``, else delete what it planned and
    verify every touched run (``result.clean``). ``evidence_dirs`` are pinned on top of the
    plan's; a plan that deletes unacknowledged records needs ``include_unacknowledged`` here
    too. With a signing key configured the plan file and every index must be signed
    (``allow_unsigned`` opts out)."""
    from dpone.ops.retention.model import load_plan
    from dpone.ops.retention.sweep import apply_retention
    from dpone.signing import required

    logs.to_stderr()
    require = required(require_signature=require_signature, allow_unsigned=allow_unsigned)
    for folder in evidence_dirs:
        if not Path(folder).is_dir():
            raise UsageError(f"--pin-evidence {folder} is not a folder")
    if isinstance(plan, str | os.PathLike):
        plan = load_plan(Path(plan), require_signature=require)
    store = open_store(
        dlq_dir if dlq_dir is not None else plan.directory,
        require_signature=require_signature,
        allow_unsigned=allow_unsigned,
    )
    return apply_retention(
        store,
        plan,
        evidence_dirs=[os.fspath(Path(d).resolve()) for d in evidence_dirs],
        include_unacknowledged=include_unacknowledged,
    )


# --- release gate -------------------------------------------------------------------------------


def release_gate(
    evidence: Sequence[PathLike],
    *,
    allowed_outcomes: Sequence[str] = (),
    max_quarantine_ratio: str | float | None = None,
    roots: Sequence[PathLike] = (),
    output: PathLike | None = None,
    require_signature: bool = False,
    allow_unsigned: bool = False,
    allow_empty: bool | None = None,
    policy: PathLike | None = None,
) -> GateReport:
    """Verify evidence bundles and apply a release policy (``report.decision`` is ``pass`` or
    ``blocked``); ``output`` is a folder for ``release_gate.json`` and ``.md``.

    The default policy blocks a failed run, a failed quality gate, a run that read rows but
    loaded none (``allow_empty=True`` allows it) and a quarantine ratio above 1%; ``policy``
    is a ``dpone.gate-policy.v1`` file whose values the other arguments override."""
    from dpone.ops.gate.checks import evaluate
    from dpone.ops.gate.policy import GatePolicy
    from dpone.ops.gate.report import write_report

    ratio = None if max_quarantine_ratio is None else str(max_quarantine_ratio)
    gate_policy = GatePolicy.parse(
        allowed_outcomes,
        ratio,
        require_signature=require_signature,
        allow_unsigned=allow_unsigned,
        allow_empty=allow_empty,
        policy_file=policy,
    )
    report = evaluate(evidence, gate_policy, roots)
    if output is not None:
        write_report(report.to_json(), Path(output))
    return report


# --- pipelines (SPEC §14) -----------------------------------------------------------------------


def pipeline_list(
    work_dir: PathLike | None = None, *, manifest: PathLike | Plan | None = None
) -> PipelineList:
    """Every pipeline of a work dir (``manifest``: its folders instead), with its state and
    last run."""
    from dpone.ops.pipeline_files import PipelineDirs
    from dpone.ops.pipelines import pipeline_list as listed

    return listed(PipelineDirs.of(work_dir, manifest))


def pipeline_info(
    name: str,
    *,
    work_dir: PathLike | None = None,
    manifest: PathLike | Plan | None = None,
    limit: int | None = 5,
) -> PipelineInfo:
    """What pipeline ``name`` holds: state and cursor, journal, its last ``limit`` runs
    (None: all), DLQ runs and the sink table."""
    from dpone.ops.pipeline_files import PipelineDirs
    from dpone.ops.pipelines import pipeline_info as info

    return info(name, PipelineDirs.of(work_dir, manifest), limit=limit)


def pipeline_reset_check(
    name: str,
    *,
    work_dir: PathLike | None = None,
    manifest: PathLike | Plan | None = None,
    drop_table: bool = False,
) -> ResetDecision:
    """What :func:`pipeline_reset` would do, or its typed refusal; changes nothing."""
    from dpone.ops.pipeline_changes import decide_reset
    from dpone.ops.pipeline_files import PipelineDirs

    return decide_reset(name, PipelineDirs.of(work_dir, manifest), drop_table=drop_table)


def pipeline_reset(
    name: str,
    *,
    work_dir: PathLike | None = None,
    manifest: PathLike | Plan | None = None,
    drop_table: bool = False,
    env: Mapping[str, str] | None = None,
) -> ResetResult:
    """Forget the state of ``name`` when that cannot load rows twice (a merge or replace
    table), else refuse (``DPONE_PIPELINE_RESET_REFUSED``) unless ``drop_table`` (needs the
    manifest) empties the sink table first. Asks nothing: the caller confirmed."""
    from dpone.ops.pipeline_changes import reset_pipeline
    from dpone.ops.pipeline_files import PipelineDirs

    dirs = PipelineDirs.of(work_dir, manifest)
    return reset_pipeline(name, dirs, drop_table=drop_table, env=env)


def pipeline_drop(
    name: str,
    *,
    work_dir: PathLike | None = None,
    manifest: PathLike | Plan | None = None,
    with_evidence: bool = False,
) -> DropResult:
    """Remove the state and journal of ``name`` (``with_evidence``: its evidence bundles and
    DLQ runs too). Asks nothing: the caller confirmed."""
    from dpone.ops.pipeline_changes import drop_pipeline
    from dpone.ops.pipeline_files import PipelineDirs

    dirs = PipelineDirs.of(work_dir, manifest)
    return drop_pipeline(name, dirs, with_evidence=with_evidence)


def ops_report(
    work_dir: PathLike,
    *,
    output: PathLike | None = None,
    now: datetime | str | None = None,
) -> OpsReport:
    """The operator's HTML page of a work dir (runs, rejects, schema changes, gate verdicts,
    DLQ size, what retention would free at ``now``); ``output`` writes it atomically."""
    from dpone.ops.pipeline_files import PipelineDirs
    from dpone.ops.report_html import build_report

    report = build_report(PipelineDirs.of(work_dir), _moment(now))
    if output is None:
        return report
    from dataclasses import replace

    from dpone.durable import replace_atomic

    replace_atomic(Path(output), report.html.encode())
    return replace(report, output=os.fspath(output))


__all__ = [
    "STORE_FOLDERS",
    "Verification",
    "open_store",
    "ops_report",
    "pipeline_drop",
    "pipeline_info",
    "pipeline_list",
    "pipeline_reset",
    "pipeline_reset_check",
    "release_gate",
    "replay_execute",
    "replay_plan",
    "retention_apply",
    "retention_plan",
    "verify",
]
