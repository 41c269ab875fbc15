"""Chunking never changes results: a run's outcome is the same at every ``chunk_size``.

A generated CSV or JSONL file (declared and undeclared columns, good and bad values, empty
fields, JSONL keys left out) runs through the real runtime (``dpone.run``) into a DuckDB file
on disk once per chunk size (1, 2, 7 and the whole file), in every enforcement mode, evolution
setting, conflict policy and ``empty_string_is_null``, into a table the run creates or one
that exists already. Every run must end the same: the same failure code (a failed run stops
where its chunk failed, so only that and the untouched table are compared), or the same table
(columns, types and rows), the same DLQ records (ref, reason, column, source offset, expected
type) and the same evidence counts.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpone
from tests.support import dlqfiles

CHUNK_SIZES = (1, 2, 7, 10_000)
MODES = ("strict", "coerce", "quarantine", "warn")
EVOLUTION = ("evolve", "freeze", "discard_row", "discard_value")

DECLARED = {
    "id": {"type": "integer", "nullable": False},
    "amount": {"type": "decimal", "precision": 8, "scale": 2},
    "flag": {"type": "boolean"},
}
#: Per column: canonical values, values only coerce repairs, values nothing accepts, "".
VALUES = {
    "id": ["1", "2", "17", " 3", "1e1", "x", ""],
    "amount": ["1.50", "2", "-0.25", " 4.00", "1e2", "12.345", "abc", ""],
    "flag": ["true", "FALSE", "yes", "0", "maybe", ""],
    # undeclared: inferred from the sample (sample_rows) or held by the existing table
    "u_num": ["5", "70", "007", "2.5", "x", "2026-01-02", ""],
    "u_text": ["a", "1", "true", "", "2026-01-02"],
}
#: The table as an earlier run left it: ``u_num`` is there (data_type governs its values),
#: ``u_text`` is not (columns governs it).
EXISTING_DDL = (
    "CREATE TABLE main.t (id BIGINT NOT NULL, amount DECIMAL(8,2), flag BOOLEAN, u_num BIGINT)"
)

# Derandomized: the same examples on every run, so `make test` never fails on a case that a
# later run would not see. To explore others, set derandomize=False and run with
# `--hypothesis-seed=N -p no:randomly` (seeds 1-8 were run so; seed 5 found a JSONL key
# first met after the first chunk, within the sample, typed from its own chunk: fixed).
SETTINGS = settings(
    max_examples=14,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    columns = ["id", *(c for c in ("amount", "flag", "u_num", "u_text") if draw(st.booleans()))]
    n = draw(st.integers(1, 12))
    # None: the field is left out of a JSONL line (an empty field in CSV)
    rows = [[draw(st.sampled_from([*VALUES[c], None])) for c in columns] for _ in range(n)]
    return {
        "format": draw(st.sampled_from(["csv", "jsonl"])),
        "columns": columns,
        "rows": rows,
        "enforcement": draw(st.sampled_from(MODES)),
        "evolution": {
            "tables": "evolve",
            "columns": draw(st.sampled_from(EVOLUTION)),
            "data_type": draw(st.sampled_from(EVOLUTION)),
        },
        "conflict_policy": draw(st.sampled_from(["fail", "variant_column"])),
        "empty_string_is_null": draw(st.booleans()),
        "sample_rows": draw(st.sampled_from([1, 3, 10_000])),
        "existing": draw(st.booleans()),
    }


def _manifest(case: dict[str, Any], chunk_size: int) -> dict[str, Any]:
    enforcement = case["enforcement"]
    contract: dict[str, Any] = {
        "enforcement": enforcement,
        "columns": DECLARED,
        "evolution": case["evolution"],
    }
    return {
        "name": "chunking",
        "runtime": {"work_dir": ".dpone", "chunk_size": chunk_size},
        "source": {"type": "file", "format": case["format"], "path": f"data.{case['format']}"},
        "sink": {
            "type": "duckdb",
            "database": "out.duckdb",
            "dataset": "main",
            "table": "t",
            # coerce holds its state on a rejected row: merge keeps its re-read from loading
            # a row twice (a validate error otherwise).
            "strategy": {"mode": "merge", "unique_key": ["id"]}
            if enforcement == "coerce"
            else {"mode": "append"},
            "options": {
                "schema_contract": contract,
                "type_inference": {
                    "conflict_policy": case["conflict_policy"],
                    "empty_string_is_null": case["empty_string_is_null"],
                    "sample_rows": case["sample_rows"],
                },
                "dlq": {"pii_policy": "reference_only"},
            },
        },
    }


def _outcome(root: Path, case: dict[str, Any], chunk_size: int) -> dict[str, Any]:
    """One run at ``chunk_size`` in a folder of its own; what it left, chunk-free."""
    root.mkdir()
    if case["format"] == "jsonl":
        lines = [
            json.dumps({c: v for c, v in zip(case["columns"], row, strict=True) if v is not None})
            for row in case["rows"]
        ]
        (root / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        with (root / "data.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(case["columns"])
            writer.writerows(["" if v is None else v for v in row] for row in case["rows"])
    if case["existing"]:
        with duckdb.connect(str(root / "out.duckdb")) as con:
            con.execute(EXISTING_DDL)
    manifest = root / "manifest.yaml"
    manifest.write_text(json.dumps(_manifest(case, chunk_size)), encoding="utf-8")
    report = dpone.run(manifest, check=False)
    evidence = json.loads((root / str(report.evidence)).read_bytes())  # relative to root
    summary = {k: v for k, v in evidence["summary"].items() if k != "chunks"}
    outcome: dict[str, Any] = {
        "exit_code": report.exit_code,
        "error": report.error.code if report.error is not None else None,
        "data_outcome": evidence["data_outcome"],
        "summary": summary,
        "violations": sorted(json.dumps(v, sort_keys=True) for v in evidence["violations"]),
        "dlq_reasons": evidence["dlq"]["reasons"],
        "schema_changes": evidence["schema_changes"],
        "dlq": sorted(
            (
                r["record_ref"],
                r["reason"]["code"],
                r["reason"]["column"],
                r["diagnostics"]["source_offset"],
                r["diagnostics"]["expected_type"],
            )
            for r in dlqfiles.records_on_disk(root / ".dpone" / "dlq", report.run_id)
        )
        if (root / ".dpone" / "dlq" / "runs" / report.run_id).exists()
        else [],
    }
    if not (root / "out.duckdb").exists():  # a run that failed before its sink opened
        return outcome
    with duckdb.connect(str(root / "out.duckdb"), read_only=True) as con:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 't'"
        ).fetchall()
        if found[0][0]:
            outcome["columns"] = con.execute("DESCRIBE main.t").fetchall()
            rows = con.execute("SELECT * FROM main.t").fetchall()
            outcome["rows"] = sorted(rows, key=repr)
    return outcome


def _failed(outcome: dict[str, Any]) -> dict[str, Any]:
    kept = ("exit_code", "error", "columns", "rows", "schema_changes", "data_outcome")
    return {k: v for k, v in outcome.items() if k in kept}


@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A fresh folder per example (Hypothesis reuses the function's fixtures)."""
    counter = iter(range(1_000_000))
    return lambda: tmp_path_factory.mktemp(f"case{next(counter)}")


@SETTINGS
@given(case=cases())
def test_every_chunk_size_ends_the_same(scratch: Any, case: dict[str, Any]) -> None:
    folder = scratch()
    outcomes = {size: _outcome(folder / f"chunk{size}", case, size) for size in CHUNK_SIZES}
    whole = outcomes[CHUNK_SIZES[-1]]
    for size, outcome in outcomes.items():
        if whole["exit_code"] and outcome["exit_code"]:
            # A failed run stops at the chunk that failed it: how far it read (its counts,
            # the DLQ records of an aborted run) depends on where chunks end; what it
            # leaves (its code, the table untouched) does not.
            outcome, whole = _failed(outcome), _failed(whole)
        differ = {
            k: (outcome.get(k), whole.get(k))
            for k in {*outcome, *whole}
            if outcome.get(k) != whole.get(k)
        }
        assert not differ, (size, differ)
