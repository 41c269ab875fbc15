"""The assertion engine: owns policy; assertion types only observe rows and give verdicts.

Rows reach the engine after contract enforcement (only rows that would load), chunk by
chunk, and every assertion sees them in declaration order, custom predicates last (the
compiler already ordered ``Plan.quality.assertions`` so). Row verdicts under ``fail`` stop
the run at once; under ``quarantine`` the row goes to the DLQ with ``quality.rule_failed``
and the first failing assertion as ``rule_id``; under ``warn`` they are counted, the first
five violations per assertion logged one by one (``assertion.warn``: the assertion and the
row's position among the rows it judged, never a value) and, once the batch verdicts are in,
one ``assertion.warn_summary`` line gives the totals. Batch verdicts arrive in
:meth:`AssertionEngine.finalize`, after the last chunk and before the sink commits.
:meth:`AssertionEngine.announce` logs the gate once per run (``assertion.gate_attached``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.assertions.catalog import AssertionTypeInfo, Registered
from dpone.assertions.spec import AssertionSpec, AssertionVerdict
from dpone.contracts.kernels import falses
from dpone.errors import DponeError
from dpone.logs import get_logger
from dpone.usercode import UserCodeError, load_callable, split_reference

log = get_logger("dpone.assertions")
WARN_LOG_LIMIT = 5


class AssertionFailed(DponeError):
    code = "DPONE_ASSERTION_FAILED"
    stage = "assert"


class PredicateError(DponeError):
    code = "DPONE_ASSERTION_PREDICATE_IMPORT"
    stage = "preflight"
    exit_code = 2


def _predicate_check(name: str, predicate: Callable[..., Any], vectorized: bool) -> RowCheck:
    """A custom predicate as a row check: True from the predicate means the row passes.

    Row predicates are per-row Python by design (the user asked for a function of a row);
    ``vectorized: true`` hands the whole batch over and expects a boolean mask.
    """

    def check(
        batch: pa.RecordBatch, source_columns: frozenset[str], present: Present
    ) -> pa.BooleanArray:
        try:
            if vectorized:
                mask = predicate(batch)
                passed = mask if isinstance(mask, pa.Array) else pa.array(mask, pa.bool_())
                if len(passed) != batch.num_rows:
                    raise ValueError("mask length differs from the batch")
            else:
                passed = pa.array([bool(predicate(row)) for row in batch.to_pylist()], pa.bool_())
        except DponeError:
            raise
        except Exception as exc:
            raise AssertionFailed(
                f"predicate of assertion '{name}' raised {type(exc).__name__}",
                code="DPONE_ASSERTION_PREDICATE_ERROR",
                fixes=("make the predicate return a bool for every row without raising",),
            ) from None
        failing: pa.BooleanArray = pc.invert(pc.fill_null(passed, False))
        return failing

    return check


Present = Mapping[str, pa.BooleanArray] | None
RowCheck = Callable[[pa.RecordBatch, frozenset[str], Present], pa.BooleanArray | None]


def _row_check(instance: Any) -> RowCheck:
    """A type's ``observe``, given the source's real columns when it asks for them
    (``sees_source_columns = True``: key presence is about the source, not the contract), and
    the per-row presence of keys some rows lack (``sees_key_presence = True``)."""
    if getattr(instance, "sees_key_presence", False):
        return lambda batch, keys, present: instance.observe(
            batch, source_columns=keys, present=present
        )
    if getattr(instance, "sees_source_columns", False):
        return lambda batch, keys, present: instance.observe(batch, source_columns=keys)
    return lambda batch, keys, present: instance.observe(batch)


def load_predicate(spec: str, base_dir: Path) -> Callable[..., Any]:
    """Import ``module:attr`` (or ``module.attr``), the manifest's folder first."""
    try:
        return load_callable(spec, base_dir)
    except UserCodeError as err:
        if err.failure == "not_callable":
            raise PredicateError(
                f"predicate {spec} is not callable",
                code="DPONE_ASSERTION_PREDICATE_NOT_CALLABLE",
                fixes=("point the predicate at a function",),
            ) from None
        module_name, attr = split_reference(spec)
        raise PredicateError(
            f"predicate {spec} does not import ({err.cause or 'not module:attr'})",
            fixes=(f"check that {module_name}.py is next to the manifest and defines {attr}",),
        ) from None


@dataclass(slots=True)
class _Tally:
    """One assertion's running count over a run: rows observed and failed, warnings logged."""

    spec: AssertionSpec
    scope: str
    check: RowCheck
    finish: Callable[[int], str | None] | None = None
    failed: int = 0
    observed: int = 0
    logged: int = 0
    batch_failed: bool = False


class AssertionEngine:
    """Runs a plan's assertions over the chunks of one run (one engine per run)."""

    def __init__(
        self,
        specs: Sequence[AssertionSpec],
        base_dir: Path,
        types: Mapping[str, AssertionTypeInfo] | None = None,
    ) -> None:
        types = types if types is not None else Registered()
        self.tallies: list[_Tally] = []
        self.rows_passed = 0
        #: rows of the last :meth:`observe` batch a ``warn`` assertion failed (None: none)
        self.warned: pa.BooleanArray | None = None
        for spec in specs:
            if spec.type == "custom":
                predicate = load_predicate(str(spec.params["predicate"]), base_dir)
                vectorized = bool(spec.params.get("vectorized"))
                self.tallies.append(
                    _Tally(spec, "row", _predicate_check(spec.name, predicate, vectorized))
                )
                continue
            info = types.get(spec.type)
            if info is None or info.factory is None:
                raise PredicateError(
                    f"assertion type '{spec.type}' is not registered",
                    code="DPONE_ASSERTION_UNKNOWN_TYPE",
                    fixes=("see `dpone plugins list`",),
                )
            instance = info.factory(spec.params)
            self.tallies.append(_Tally(spec, info.scope, _row_check(instance), instance.finalize))

    # --- per chunk ------------------------------------------------------------------------------

    def observe(
        self,
        batch: pa.RecordBatch,
        *,
        source_columns: Collection[str] | None = None,
        present: Present = None,
        fail_fast: bool = True,
    ) -> tuple[pa.RecordBatch, pa.BooleanArray | None, list[str | None] | None]:
        """Row verdicts for one chunk of valid rows.

        ``source_columns`` are the keys the source really gave (the contract has filled in
        absent declared columns with NULLs by now); None: the batch's own columns.
        ``present`` maps a key some rows lack to a mask aligned with the batch, true where the
        row has the key (sources with keys: JSONL, Python, REST, dlt); None: every row has
        every key of ``source_columns``. ``self.warned`` is then the rows a ``warn``
        assertion failed.
        Each assertion sees only the rows no earlier assertion diverted to the DLQ (SPEC §4),
        so a later ``fail`` never aborts the run over a row already quarantined.
        Returns the batch, a mask of the rows to quarantine (None: none) and, aligned with
        the batch, the rule id of the assertion that quarantined each row. With ``fail_fast``
        False (a replay), rows failing an ``on_failure: fail`` assertion are in the mask too
        instead of raising :class:`AssertionFailed`.
        """
        n = batch.num_rows
        keys = frozenset(batch.schema.names if source_columns is None else source_columns)
        quarantine: pa.BooleanArray | None = None
        self.warned = None
        rules = pa.nulls(n, pa.string())
        for tally in self.tallies:
            if tally.scope != "row":
                continue
            alive = None if quarantine is None else pc.invert(quarantine)
            view = batch if alive is None else batch.filter(alive)
            if view.num_rows == 0:
                break
            seen = present
            if present is not None and alive is not None:
                seen = {name: mask.filter(alive) for name, mask in present.items()}
            failing = tally.check(view, keys, seen)
            judged_before = tally.observed
            tally.observed += view.num_rows
            if failing is None:
                continue
            failing = pc.fill_null(failing, False)
            count = int(failing.true_count)
            if not count:
                continue
            tally.failed += count
            policy = tally.spec.on_failure
            if policy == "fail" and fail_fast:
                raise AssertionFailed(
                    f"assertion '{tally.spec.name}' failed on {count} row(s)",
                    fixes=(
                        "fix the data, or set on_failure: quarantine / warn for this assertion",
                    ),
                )
            if alive is not None:  # back to the batch's positions
                failing = pc.replace_with_mask(falses(n), alive, failing)
            if policy == "warn":
                self._log_rows(tally, failing, judged_before)
                self.warned = failing if self.warned is None else pc.or_(self.warned, failing)
                continue
            rules = pc.if_else(failing, pa.scalar(tally.spec.name), rules)
            quarantine = failing if quarantine is None else pc.or_(quarantine, failing)
        diverted = 0 if quarantine is None else int(quarantine.true_count)
        self.rows_passed += n - diverted
        if quarantine is None or not diverted:
            return batch, None, None
        return batch, quarantine, rules.to_pylist()

    def _log_rows(self, tally: _Tally, failing: pa.BooleanArray, judged_before: int) -> None:
        """Log the first violations of a ``warn`` assertion one by one, up to five per run.

        ``failing`` is aligned with the rows the assertion judged in this chunk, so a row is
        named by its 1-based position among every row the assertion judged in the run."""
        room = WARN_LOG_LIMIT - tally.logged
        if room <= 0:
            return
        positions = pc.indices_nonzero(failing).to_pylist()[:room]
        for position in positions:
            tally.logged += 1
            log.warning(
                "assertion.warn",
                assertion=tally.spec.name,
                type=tally.spec.type,
                judged_row=judged_before + int(position) + 1,
            )

    def announce(self, *, pipeline: str, run_id: str) -> None:
        """One ``assertion.gate_attached`` line naming the assertions in the order they
        judge rows, with their scope and policy (nothing when there are none)."""
        if not self.tallies:
            return
        log.info(
            "assertion.gate_attached",
            pipeline=pipeline,
            run_id=run_id,
            count=len(self.tallies),
            assertions=[
                {
                    "name": t.spec.name,
                    "type": t.spec.type,
                    "scope": t.scope,
                    "on_failure": t.spec.on_failure,
                }
                for t in self.tallies
            ],
        )

    def _warn_summary(self) -> None:
        """One line with every ``warn`` assertion that failed and how many rows it warned
        about (a batch assertion: the rows of the batch it judged)."""
        warned = {
            t.spec.name: t.failed if t.scope == "row" else t.observed
            for t in self.tallies
            if t.spec.on_failure == "warn" and (t.failed or t.batch_failed)
        }
        if warned:
            log.warning(
                "assertion.warn_summary",
                assertions=warned,
                logged=sum(t.logged for t in self.tallies if t.spec.name in warned),
            )

    # --- end of the batch -----------------------------------------------------------------------

    def finalize(self) -> None:
        """Batch verdicts over every row that would load, then the run's warn summary;
        the first failing ``fail`` verdict raises (before the commit)."""
        failure: AssertionFailed | None = None
        for tally in self.tallies:
            if tally.scope != "batch" or tally.finish is None:
                continue
            tally.observed = self.rows_passed
            message = tally.finish(self.rows_passed)
            if message is None:
                continue
            tally.batch_failed = True
            if tally.spec.on_failure == "fail":
                failure = failure or AssertionFailed(
                    f"assertion '{tally.spec.name}' failed: {message}",
                    fixes=("check the source for an outage or a runaway extraction",),
                )
                continue
            tally.logged += 1
            log.warning(
                "assertion.warn",
                assertion=tally.spec.name,
                type=tally.spec.type,
                message=message,
                batch_rows=self.rows_passed,
            )
        self._warn_summary()
        if failure is not None:
            raise failure

    def verdicts(self) -> tuple[AssertionVerdict, ...]:
        out = []
        for t in self.tallies:
            failed = t.batch_failed if t.scope == "batch" else t.failed > 0
            verdict = "passed"
            if failed:
                verdict = {"fail": "failed", "warn": "warned", "quarantine": "quarantined"}[
                    t.spec.on_failure
                ]
            out.append(
                AssertionVerdict(
                    name=t.spec.name,
                    type=t.spec.type,
                    scope="row" if t.scope == "row" else "batch",
                    on_failure=t.spec.on_failure,
                    verdict=verdict,  # type: ignore[arg-type]
                    failed_rows=t.failed,
                    observed_rows=t.observed,
                )
            )
        return tuple(out)
