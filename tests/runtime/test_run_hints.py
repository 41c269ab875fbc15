"""What ``dpone run`` tells users about rejected rows and slow stages: hints that name the
fix (null markers, empty strings, safe coercion), warnings for a run that loaded nothing, and
stage timings; and what ``dpone ops dlq summary`` shows of the run's hints.

Every run is ``python -m dpone`` as a process on real CSV files and a real DuckDB file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpone.published import schema_errors
from tests.support.processes import dpone_subprocess

MANIFEST = """\
kind: dpone.manifest.v1
name: {name}
runtime: {{work_dir: .dpone}}
source: {{type: file, format: csv, path: data.csv{options}}}
sink:
  type: duckdb
  dataset: analytics
  table: {name}
  options:
    schema_contract:
      enforcement: {enforcement}
      columns:
{columns}
    runtime_evidence: {{output_dir: .dpone/evidence}}
state: {{type: disabled}}
"""
#: airquality-like: 6 rows, Ozone "NA" in 4, Solar.R "NA" in 1.
AIRQUALITY = (
    "Ozone,Solar.R,Wind,Month\n"
    "41,190,7.4,5\n"
    "NA,118,8,5\n"
    "12,NA,12.6,5\n"
    "NA,313,11.5,5\n"
    "NA,NA,14.3,5\n"
    "NA,299,8.6,5\n"
)
AIR_COLUMNS = """\
        Ozone: {type: integer}
        Solar.R: {type: integer}
        Wind: {type: float}
        Month: {type: integer}"""


def project(
    tmp_path: Path,
    csv: str,
    columns: str,
    *,
    name: str = "air",
    enforcement: str = "quarantine",
    options: str = "",
) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "data.csv").write_text(csv, encoding="utf-8")
    manifest = MANIFEST.format(name=name, enforcement=enforcement, columns=columns, options=options)
    (tmp_path / "manifest.yaml").write_text(manifest, encoding="utf-8")
    return tmp_path


def run(root: Path, fmt: str = "json") -> tuple[int, str]:
    proc = dpone_subprocess(["run", "manifest.yaml", "--format", fmt], cwd=root, env={})
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout


def run_json(root: Path) -> tuple[int, dict[str, Any]]:
    code, out = run(root)
    doc: dict[str, Any] = json.loads(out)
    assert schema_errors(doc, "dpone.run.v1") == []
    return code, doc


def hints_of(doc: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [h for h in doc["hints"] if h["code"] == code]


def evidence_of(root: Path, doc: dict[str, Any]) -> dict[str, Any]:
    evidence: dict[str, Any] = json.loads((root / doc["evidence"]).read_bytes())
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    return evidence


def summary(root: Path, *fmt: str) -> tuple[int, str]:
    proc = dpone_subprocess(
        ["ops", "dlq", "summary", "--dir", ".dpone/dlq", *fmt], cwd=root, env={}
    )
    return proc.returncode, proc.stdout


def test_na_in_an_integer_column_names_null_values(tmp_path: Path) -> None:
    root = project(tmp_path, AIRQUALITY, AIR_COLUMNS)

    code, doc = run_json(root)

    assert (code, doc["rows"]["read"], doc["rows"]["quarantined"]) == (0, 6, 5)
    [ozone] = [h for h in hints_of(doc, "null_values") if h["column"] == "Ozone"]
    assert ozone["fix"] == 'source.options.csv.null_values: ["NA"]'
    assert ozone["rows"] == 4
    assert '4 of 4 rejected value(s) of column Ozone are "NA"' in ozone["message"]
    assert evidence_of(root, doc)["hints"] == doc["hints"]

    _, text = run(project(tmp_path / "again", AIRQUALITY, AIR_COLUMNS), "text")
    assert 'hint       4 of 4 rejected value(s) of column Ozone are "NA"' in text
    assert 'fix: source.options.csv.null_values: ["NA"]' in text


def test_the_hint_is_right_null_values_loads_every_row(tmp_path: Path) -> None:
    options = ', options: {csv: {null_values: ["NA"]}}'
    root = project(tmp_path, AIRQUALITY, AIR_COLUMNS, options=options)

    code, doc = run_json(root)

    assert (code, doc["rows"]["loaded"], doc["rows"]["quarantined"], doc["hints"]) == (0, 6, 0, [])
    [database] = root.rglob("*.duckdb")
    with duckdb.connect(str(database), read_only=True) as db:
        assert db.execute("select count(*), count(Ozone) from analytics.air").fetchone() == (6, 2)


def test_dlq_summary_shows_the_runs_hints(tmp_path: Path) -> None:
    root = project(tmp_path, AIRQUALITY, AIR_COLUMNS)
    run_json(root)

    code, out = summary(root, "--format", "json")
    assert code == 0
    [run_doc] = json.loads(out)["runs"]
    assert any(
        h["code"] == "null_values" and h["fix"] == 'source.options.csv.null_values: ["NA"]'
        for h in run_doc["hints"]
    )

    code, markdown = summary(root)
    assert code == 0
    assert 'source.options.csv.null_values: ["NA"]' in markdown


def test_dlq_summary_tells_a_missing_bundle_from_a_run_with_no_single_fix(tmp_path: Path) -> None:
    csv = "id,qty\n1,5\n2,x\n3,y\n4,7\n"
    columns = "        id: {type: integer}\n        qty: {type: integer}"
    root = project(tmp_path, csv, columns, name="qty")
    run_json(root)

    code, out = summary(root, "--format", "json")
    [run_doc] = json.loads(out)["runs"]
    assert (code, run_doc["hints"], run_doc["evidence_found"]) == (0, [], True)
    code, markdown = summary(root)
    assert "No hints: no one setting would load these rows" in markdown

    code, out = summary(root, "--format", "json", "--evidence-dir", str(tmp_path / "elsewhere"))
    [run_doc] = json.loads(out)["runs"]
    assert (code, run_doc["hints"], run_doc["evidence_found"]) == (0, [], False)
    code, markdown = summary(root, "--evidence-dir", str(tmp_path / "elsewhere"))
    assert "No hints: the run's evidence bundle was not found" in markdown


def test_empty_fields_in_an_integer_column_name_empty_string_is_null(tmp_path: Path) -> None:
    csv = "id,qty\n1,5\n2,\n3,\n4,7\n"
    columns = "        id: {type: integer}\n        qty: {type: integer}"
    root = project(tmp_path, csv, columns, name="qty")

    code, doc = run_json(root)

    assert (code, doc["rows"]["quarantined"]) == (0, 2)
    [hint] = hints_of(doc, "empty_string_is_null")
    assert (hint["column"], hint["rows"]) == ("qty", 2)
    assert hint["fix"] == "type_inference.empty_string_is_null: true"
    assert hints_of(doc, "null_values") == []


def test_a_strict_failure_names_the_fix(tmp_path: Path) -> None:
    csv = "id,qty\n1,5\n2,\n3,\n4,7\n"
    columns = "        id: {type: integer}\n        qty: {type: integer}"
    root = project(tmp_path, csv, columns, name="qty", enforcement="strict")

    code, doc = run_json(root)

    assert code == 1
    assert doc["error"]["code"] == "DPONE_CONTRACT_VIOLATION"
    assert any("empty_string_is_null: true" in fix for fix in doc["error"]["fixes"])


def test_yes_no_booleans_name_safe_coercion_with_the_count(tmp_path: Path) -> None:
    csv = "id,active\n1,true\n2,yes\n3,no\n4,false\n5,maybe\n6,yes\n"
    columns = "        id: {type: integer}\n        active: {type: boolean}"
    root = project(tmp_path, csv, columns, name="flags")

    code, doc = run_json(root)

    assert (code, doc["rows"]["quarantined"]) == (0, 4)
    [hint] = hints_of(doc, "coercion_safe")
    assert (hint["column"], hint["rows"], hint["fix"]) == (
        "active",
        3,
        "schema_contract.coercion: safe",
    )
    assert "maybe" not in json.dumps(doc)


def test_a_run_that_loads_nothing_says_so(tmp_path: Path) -> None:
    csv = "id,qty\n1,x\n2,y\n3,z\n"
    columns = "        id: {type: integer}\n        qty: {type: integer}"
    root = project(tmp_path, csv, columns, name="none")

    code, doc = run_json(root)

    assert (code, doc["status"], doc["rows"]["loaded"]) == (0, "succeeded", 0)
    [nothing] = hints_of(doc, "nothing_loaded")
    assert nothing["rows"] == 3
    [column] = hints_of(doc, "column_all_rejected")
    assert column["column"] == "qty"

    _, text = run(project(tmp_path / "again", csv, columns, name="none"), "text")
    warnings = [line for line in text.splitlines() if line.startswith("  warning")]
    assert warnings == [
        "  warning    read 3 row(s) and loaded none: every row was quarantined"
        "  fix: see the hints below and `dpone ops dlq summary` for the reasons",
        "  warning    column qty rejected every row of the run (3)"
        "  fix: check the column's declared type and the source's null markers",
    ]


def test_a_column_is_all_rejected_only_when_every_chunk_rejected_it(tmp_path: Path) -> None:
    csv = "id,qty\n1,x\n2,y\n3,3\n4,4\n"  # chunks of 2: the first rejects both its rows
    columns = "        id: {type: integer}\n        qty: {type: integer}"
    root = project(tmp_path, csv, columns, name="some")
    manifest = root / "manifest.yaml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("work_dir: .dpone", "work_dir: .dpone, chunk_size: 2"))

    code, doc = run_json(root)

    assert (code, doc["rows"]["chunks"], doc["rows"]["loaded"]) == (0, 2, 2)
    assert hints_of(doc, "column_all_rejected") == []
    assert hints_of(doc, "nothing_loaded") == []


def test_timings_are_reported_per_stage(tmp_path: Path) -> None:
    root = project(tmp_path, AIRQUALITY, AIR_COLUMNS)

    _, doc = run_json(root)

    timings = doc["timings"]
    assert set(timings) == {
        *("read", "enforce", "dlq", "dlq_writer", "sink_write", "sink_writer", "commit", "total")
    }
    assert all(v >= 0 for v in timings.values())
    assert abs(timings["total"] - doc["duration_s"]) < 0.001
    parts = sum(timings[k] for k in ("read", "enforce", "dlq", "sink_write", "commit"))
    assert timings["total"] >= parts - 0.01
    assert timings["commit"] > 0
    assert timings["dlq_writer"] > 0

    _, text = run(project(tmp_path / "again", AIRQUALITY, AIR_COLUMNS), "text")
    [stages] = [line for line in text.splitlines() if line.startswith("  stages")]
    for stage in ("read ", "enforce ", "dlq ", "sink write ", "commit ", "dlq writer thread "):
        assert stage in stages


def _many_chunks_csv(rows: int) -> str:
    """Rows whose rejects spread over every chunk: "NA" counts and quantities written "+N" (a
    lossless variant), in two columns of other types."""
    lines = ["id,qty,active"]
    for i in range(rows):
        qty = "NA" if i % 7 == 0 else (f"+{i % 9}" if i % 11 == 0 else str(i % 5))
        active = "yes" if i % 13 == 0 else ("maybe" if i % 17 == 0 else "true")
        lines.append(f"{i},{qty},{active}")
    return "\n".join(lines) + "\n"


def test_hints_counted_in_batches_equal_hints_counted_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rejected values are counted in batches (dpone/runtime/hints.py): in-process, one
    run counting every chunk's values at once (a threshold of one value) and one counting
    them all at the end give the same hints, over 40 chunks."""
    from dpone import api
    from dpone.runtime import hints

    columns = """\
        id: {type: integer, nullable: false}
        qty: {type: integer}
        active: {type: boolean}"""
    found = []
    for settle in (1, 10**9):
        monkeypatch.setattr(hints, "SETTLE_VALUES", settle)
        root = project(tmp_path / f"settle{settle}", _many_chunks_csv(4_000), columns)
        text = (root / "manifest.yaml").read_text(encoding="utf-8")
        (root / "manifest.yaml").write_text(
            text.replace("work_dir: .dpone}", "work_dir: .dpone, chunk_size: 100}"),
            encoding="utf-8",
        )
        monkeypatch.chdir(root)
        report = api.run(root / "manifest.yaml", env={}, check=False)
        doc = report.to_json()
        assert doc["rows"]["read"] == 4_000
        found.append(doc["hints"])
    by_batch, by_chunk = found[1], found[0]
    assert by_batch == by_chunk
    assert {(h["code"], h.get("column"), h["rows"]) for h in by_batch} >= {
        ("null_values", "qty", 572),  # every 7th of 4,000 rows
        ("coercion_safe", "active", 308),  # every 13th ("yes"; "maybe" is not repairable)
    }
