"""The Python API of SPEC §11: validate, compile and run a manifest from your own code.

One error contract: a configuration problem (an invalid manifest, an unresolved secret, a
bad option) raises :class:`~dpone.errors.ConfigError`; every other outcome of a run is in
its :class:`~dpone.runtime.report.RunReport`. With ``check=True`` a failed run raises
:class:`RunFailed` carrying that report. A run through this API installs no
signal handler unless asked (``handle_signals=True``): the orchestrator owns the process.

The CLI (``dpone validate|plan|run``) is a shell over these functions. Heavy modules
(pyarrow, duckdb, dlt) are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dpone import logs
from dpone.errors import ConfigError, DponeError, ErrorDetail, ManifestError
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.contracts.spec import EvolutionMode
    from dpone.manifest.plan import Plan
    from dpone.runtime.interrupts import InterruptWatch
    from dpone.runtime.report import RowCounts, RunReport

VALIDATION_SCHEMA_ID = "dpone.validation.v1"


class RunFailed(DponeError):
    """A run that failed (``dpone.run(..., check=True)``): ``report`` is its run report.

    The run stopped before the sink commit, so the sink and the state are untouched; the
    report's ``error`` says why. ``report`` is None only for a run that never started (another
    process holds the pipeline's lock) or was stopped at once by a second signal. It lives
    here, beside the function that raises it, because its report is a runtime type that
    ``dpone.errors`` (the bottom layer) must not name.
    """

    code = "DPONE_RUN_FAILED"
    stage = "runtime"

    def __init__(self, message: str, *, report: RunReport | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.report = report
        if report is not None:
            self.exit_code = report.exit_code


@frozen
class Validation:
    """The outcome of :func:`validate`: ``ok``, or every error found (``dpone.error.v1``);
    ``warnings`` either way (a deprecated key: valid, but say so)."""

    path: str
    ok: bool
    errors: tuple[ErrorDetail, ...] = ()
    name: str | None = None
    fingerprint: str | None = None
    warnings: tuple[ErrorDetail, ...] = ()

    def entry(self) -> dict[str, Any]:
        """This manifest's entry in a ``dpone.validation.v1`` document."""
        entry: dict[str, Any] = {"path": self.path, "valid": self.ok}
        if not self.ok:
            entry["errors"] = [e.to_json() for e in self.errors]
        else:
            entry |= {"name": self.name, "fingerprint": self.fingerprint}
        if self.warnings:
            entry["warnings"] = [w.to_json() for w in self.warnings]
        return entry

    def to_json(self) -> dict[str, Any]:
        """The document ``dpone validate PATH --format json`` prints."""
        return validation_document([self])


def validation_document(results: Iterable[Validation]) -> dict[str, Any]:
    """``dpone.validation.v1`` for several manifests, in the order given."""
    entries = [r.entry() for r in results]
    return {
        "schema": VALIDATION_SCHEMA_ID,
        "valid": all(e["valid"] for e in entries),
        "manifests": entries,
    }


def validate(path: str | os.PathLike[str], *, allow_any_import: bool = False) -> Validation:
    """Check the manifest at ``path`` without reading any data; never raises for an invalid
    manifest (its errors are in the result)."""
    from dpone.manifest.compiler import compile_manifest

    shown = os.fspath(path)
    try:
        plan = compile_manifest(shown, allow_any_import=allow_any_import)
    except ManifestError as err:
        return Validation(path=shown, ok=False, errors=err.errors, warnings=err.warnings)
    return Validation(
        path=shown,
        ok=True,
        name=plan.name,
        fingerprint=plan.fingerprint,
        warnings=plan.warnings,
    )


# The name SPEC §11 gives; it shadows `builtins.compile` only inside this module.
def compile(
    path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    evolution: str | Mapping[str, str] | None = None,
    allow_any_import: bool = False,
) -> Plan:
    """Compile the manifest at ``path`` into a :class:`~dpone.manifest.plan.Plan`.

    Raises :class:`~dpone.errors.ConfigError` (a ``ManifestError`` listing every problem).
    With ``env``, the secrets the manifest references must resolve in it (checked, never kept
    in the plan). ``evolution`` overrides the manifest's, as ``dpone run --evolution`` does.
    """
    from dpone.manifest.compiler import compile_manifest
    from dpone.manifest.overrides import with_evolution

    settings = _evolution(evolution)  # a bad override is refused before the manifest is read
    plan = with_evolution(
        compile_manifest(os.fspath(path), allow_any_import=allow_any_import), settings
    )
    if env is not None:
        for ref in (plan.source.connection, plan.sink.connection, *plan.source.secrets):
            if ref is not None:
                ref.resolve(env)
    return plan


def run(
    manifest_or_plan: str | os.PathLike[str] | Plan,
    *,
    run_id: str | None = None,
    env: Mapping[str, str] | None = None,
    on_progress: Callable[[RowCounts], None] | None = None,
    check: bool = True,
    handle_signals: bool | InterruptWatch = False,
    evolution: str | Mapping[str, str] | None = None,
) -> RunReport:
    """Run a manifest (a path) or a compiled plan once and return its report.

    ``env`` is where secrets come from (default: ``os.environ``). ``on_progress`` receives
    the row counts after every chunk. ``check=True`` raises :class:`RunFailed` (with
    ``.report``) when the run failed; a run that loaded its good rows and quarantined the bad
    ones succeeded (exit code 0). ``handle_signals=True`` lets the run turn SIGINT/SIGTERM
    into an orderly stop; an :class:`~dpone.runtime.interrupts.InterruptWatch` is a watch the
    caller already started (the CLI's).
    """
    from dpone.manifest.plan import Plan
    from dpone.runtime import environment
    from dpone.runtime.prefetch import read_early

    logs.to_stderr()
    if isinstance(manifest_or_plan, Plan):
        from dpone.manifest.overrides import with_evolution

        plan = with_evolution(manifest_or_plan, _evolution(evolution))
    else:
        plan = compile(manifest_or_plan, evolution=evolution)
    variables = environment(env)
    # Local files start being read now, while the run's own modules are imported.
    early = read_early(plan, variables)
    try:
        from dpone.runtime.lifecycle import RunOptions, run_pipeline
    except BaseException:
        if early is not None:
            early.chunks.close()
        raise
    watch = None if isinstance(handle_signals, bool) else handle_signals
    options = RunOptions(
        run_id=run_id,
        env=variables,
        progress=on_progress,
        interrupts=watch,
        watch_signals=handle_signals is not False,
    )
    try:
        report = run_pipeline(plan, options, early)
    except ConfigError:
        raise
    except DponeError as err:
        # The run never started (the pipeline is locked) or a second signal stopped it at
        # once: there is no report to return.
        failed = RunFailed(
            err.message,
            code=err.code,
            stage=err.stage,
            fixes=err.fixes,
            pointer=err.pointer,
            path=err.path,
            line=err.line,
            column=err.column,
            details=err.details,
        )
        failed.exit_code = err.exit_code
        raise failed from err
    if check and report.exit_code != 0:
        message = f"the run {report.run_id} of {report.pipeline} failed"
        if report.error is not None:
            message += f": {report.error.code}: {report.error.message}"
        raise RunFailed(message, report=report)
    return report


def prevalidated_metadata(manifest_or_plan: str | os.PathLike[str] | Plan) -> dict[str, str]:
    """The Parquet key-value metadata a producer writes into each file it exported already
    held to this manifest's contract, so that a ``source.prevalidated: true`` run loads it
    natively: ``{"dpone.prevalidated": "<JSON with the contract fingerprint>"}``.

    The mark names the contract (its columns, types and nullability), not the pipeline: a
    change to the declared columns needs the files exported again. With pyarrow::

        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), **dpone.prevalidated_metadata("manifest.yaml")}
        )
        pq.write_table(table, "export/part-0001.parquet")
    """
    from dpone.contracts.prevalidated import MARK_KEY, mark_value
    from dpone.manifest.plan import Plan

    plan = manifest_or_plan if isinstance(manifest_or_plan, Plan) else compile(manifest_or_plan)
    return {MARK_KEY: mark_value(plan.contract_fingerprint)}


def _evolution(evolution: str | Mapping[str, str] | None) -> dict[str, EvolutionMode]:
    """``"freeze"``, ``"columns=freeze,..."`` or ``{"columns": "freeze"}`` as settings."""
    from dpone.manifest.overrides import parse_evolution

    if evolution is None:
        return {}
    if isinstance(evolution, str):
        return parse_evolution(evolution)
    text = ",".join(f"{key}={mode}" for key, mode in evolution.items())
    return parse_evolution(text) if text else {}


__all__ = [
    "VALIDATION_SCHEMA_ID",
    "RunFailed",
    "Validation",
    "compile",
    "prevalidated_metadata",
    "run",
    "validate",
    "validation_document",
]
