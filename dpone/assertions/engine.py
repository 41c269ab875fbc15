"""The assertion engine: owns policy; assertion types only observe rows and give verdicts.

Rows reach the engine after contract enforcement (only rows that would load), chunk by
chunk, and every assertion sees them in declaration order, custom predicates last (the
compiler already ordered ``Plan.quality.assertions`` so). Row verdicts under ``fail`` stop
the run at once; under ``quarantine`` the row goes to the DLQ with ``quality.rule_failed``
and the first failing assertion as ``rule_id``; under ``warn`` they are counted and the first
five per assertion logged (names and counts, never values). Batch verdicts arrive in
:meth:`AssertionEngine.finalize`, after the last chunk and before the sink commits.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from dpone.assertions.catalog import BUILTIN_TYPES
from dpone.errors import DponeError
from dpone.evidence.model import AssertionVerdict
from dpone.manifest.plan import AssertionSpec

log = structlog.get_logger("dpone.assertions")
WARN_LOG_LIMIT = 5


class AssertionFailed(DponeError):
    code = "DPONE_ASSERTION_FAILED"
    stage = "assert"


class PredicateError(DponeError):
    code = "DPONE_ASSERTION_PREDICATE_IMPORT"
    stage = "preflight"
    exit_code = 2


def load_predicate(spec: str, base_dir: Path) -> Callable[..., Any]:
    """Import ``module:attr`` (or ``module.attr``) with the manifest's folder on sys.path."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    folder = str(base_dir)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
        target = getattr(module, attr)
    except Exception as exc:  # an import can fail in any way; report it as data
        raise PredicateError(
            f"predicate {spec} does not import ({type(exc).__name__})",
            fixes=(f"check that {module_name}.py is next to the manifest and defines {attr}",),
        ) from None
    if not callable(target):
        raise PredicateError(
            f"predicate {spec} is not callable",
            code="DPONE_ASSERTION_PREDICATE_NOT_CALLABLE",
            fixes=("point the predicate at a function",),
        )
    return target  # type: ignore[no-any-return]


@dataclass(slots=True)
class _Tally:
    spec: AssertionSpec
    scope: str
    failed: int = 0
    observed: int = 0
    logged: int = 0
    seen: set[bytes] = field(default_factory=set)
    predicate: Callable[..., Any] | None = None
    batch_failed: bool = False


class AssertionEngine:
    def __init__(self, specs: Sequence[AssertionSpec], base_dir: Path) -> None:
        self.tallies: list[_Tally] = []
        self.rows_passed = 0
        for spec in specs:
            scope = "row" if spec.type == "custom" else BUILTIN_TYPES[spec.type].scope
            tally = _Tally(spec, scope)
            if spec.type == "custom":
                tally.predicate = load_predicate(str(spec.params["predicate"]), base_dir)
            self.tallies.append(tally)

    # --- per chunk ------------------------------------------------------------------------------

    def observe(
        self, batch: pa.RecordBatch
    ) -> tuple[pa.RecordBatch, pa.BooleanArray | None, list[str | None] | None]:
        """Row verdicts for one chunk of valid rows.

        Returns the batch, a mask of the rows to quarantine (None: none) and, aligned with
        the batch, the rule id of each quarantined row's first failing assertion.
        """
        n = batch.num_rows
        quarantine: pa.BooleanArray | None = None
        rules: list[str | None] | None = None
        for tally in self.tallies:
            if tally.scope != "row" or n == 0:
                continue
            failing = self._row_failures(tally, batch)
            tally.observed += n
            count = int(pc.sum(failing).as_py() or 0)
            if not count:
                continue
            tally.failed += count
            policy = tally.spec.on_failure
            if policy == "fail":
                raise AssertionFailed(
                    f"assertion '{tally.spec.name}' failed on {count} row(s)",
                    fixes=(
                        "fix the data, or set on_failure: quarantine / warn for this assertion",
                    ),
                )
            if policy == "warn":
                self._log_warning(tally, count)
                continue
            if quarantine is None or rules is None:
                quarantine = failing
                rules = [tally.spec.name if f else None for f in failing.to_pylist()]
            else:
                for i, f in enumerate(failing.to_pylist()):
                    if f and rules[i] is None:
                        rules[i] = tally.spec.name
                quarantine = pc.or_(quarantine, failing)
        kept = n - (int(pc.sum(quarantine).as_py() or 0) if quarantine is not None else 0)
        self.rows_passed += kept
        return batch, quarantine, rules

    def _row_failures(self, tally: _Tally, batch: pa.RecordBatch) -> pa.BooleanArray:
        kind = tally.spec.type
        n = batch.num_rows
        if kind == "required_columns":
            missing = [c for c in tally.spec.params["value"] if c not in batch.schema.names]
            return pa.array([bool(missing)] * n, pa.bool_())
        if kind == "unique_columns":
            return self._duplicates(tally, batch)
        if kind == "custom":
            return self._predicate(tally, batch)
        raise AssertionFailed(f"assertion type '{kind}' has no row verdict")

    def _duplicates(self, tally: _Tally, batch: pa.RecordBatch) -> pa.BooleanArray:
        # Keys are kept as 16-byte BLAKE2b digests, not values: bounded memory and no row
        # value held anywhere. The first occurrence in the run passes; repeats fail.
        columns = [c for c in tally.spec.params["value"] if c in batch.schema.names]
        if not columns:
            return pa.array([False] * batch.num_rows, pa.bool_())
        keys = batch.select(columns).to_pylist()
        out = []
        seen = tally.seen
        for key in keys:
            digest = hashlib.blake2b(repr(tuple(key.values())).encode(), digest_size=16).digest()
            if digest in seen:
                out.append(True)
            else:
                seen.add(digest)
                out.append(False)
        return pa.array(out, pa.bool_())

    def _predicate(self, tally: _Tally, batch: pa.RecordBatch) -> pa.BooleanArray:
        predicate = tally.predicate
        assert predicate is not None
        name = tally.spec.name
        try:
            if tally.spec.params.get("vectorized"):
                mask = predicate(batch)
                passed = pa.array(mask, pa.bool_()) if not isinstance(mask, pa.Array) else mask
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

    def _log_warning(self, tally: _Tally, count: int) -> None:
        if tally.logged < WARN_LOG_LIMIT:
            tally.logged += 1
            log.warning("assertion.warn", assertion=tally.spec.name, failed_rows=count)

    # --- end of the batch -----------------------------------------------------------------------

    def finalize(self) -> None:
        """Batch verdicts over every row that would load; ``fail`` raises before the commit."""
        for tally in self.tallies:
            if tally.scope != "batch":
                continue
            tally.observed = self.rows_passed
            value = int(tally.spec.params["value"])
            if tally.spec.type == "min_rows_per_load":
                tally.batch_failed = self.rows_passed < value
            elif tally.spec.type == "max_rows_per_load":
                tally.batch_failed = self.rows_passed > value
            if not tally.batch_failed:
                continue
            if tally.spec.on_failure == "fail":
                raise AssertionFailed(
                    f"assertion '{tally.spec.name}' failed: {self.rows_passed} row(s) against "
                    f"a limit of {value}",
                    fixes=("check the source for an outage or a runaway extraction",),
                )
            self._log_warning(tally, self.rows_passed)

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

    def openlineage_facets(self) -> dict[str, Any]:
        """The standard dataQualityAssertions facet's shape plus a dpone facet."""
        verdicts = self.verdicts()
        return {
            "dataQualityAssertions": {
                "assertions": [
                    {"assertion": v.name, "success": v.verdict == "passed"} for v in verdicts
                ]
            },
            "dpone": {"rowsPassedAssertions": self.rows_passed, "assertionCount": len(verdicts)},
        }
