"""The first hour of a new user: a manifest and its data in a fresh folder, `dpone validate`
and `dpone run` through the CLI, and the outcome read back from the DuckDB file, the DLQ
(`dpone ops dlq summary`) and the exit codes. One test per way a first run went wrong for a
new user."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.published import schema_errors
from tests.support.paths import EXAMPLES
from tests.support.processes import CliRun, free_port, listening, wait_until

PG_URL_VARIABLE = "DPONE_PG_URL"


def dpone(*args: str, env: dict[str, str] | None = None) -> CliRun:
    result = CliRunner().invoke(cli, list(args), env=env)
    return CliRun(result.exit_code, result.stdout, result.stderr)


class Project:
    """A user's folder: ``manifest.yaml``, ``data.csv``, and what the runs leave behind."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.manifest = root / "manifest.yaml"

    def write(self, manifest: str, csv: str) -> None:
        self.manifest.write_text(textwrap.dedent(manifest))
        (self.root / "data.csv").write_text(textwrap.dedent(csv))

    def validate(self) -> CliRun:
        return dpone("validate", str(self.manifest), "--format", "json")

    def run(self) -> CliRun:
        return dpone("run", str(self.manifest), "--format", "json")

    def rows(self, sql: str = "SELECT * FROM main.t ORDER BY ALL") -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.root / ".dpone" / "firsthour.duckdb"), read_only=True) as db:
            return db.execute(sql).fetchall()

    def dlq_reasons(self) -> dict[str, int]:
        out = dpone(
            "ops", "dlq", "summary", "--dir", str(self.root / ".dpone" / "dlq"), "--format", "json"
        )
        assert out.exit_code == 0, out.stderr
        reasons: dict[str, int] = out.doc["by_reason"]
        return reasons


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def manifest(
    contract: str,
    quality: str = "",
    dlq: str = "",
    source: str = "{type: file, format: csv, path: data.csv}",
) -> str:
    """A CSV -> DuckDB manifest with the given contract (and quality / dlq sections)."""
    return (
        textwrap.dedent(
            f"""\
            name: firsthour
            source: {source}
            sink:
              type: duckdb
              dataset: main
              table: t
              options:
                schema_contract:
            """
        )
        + textwrap.indent(textwrap.dedent(contract), " " * 6)
        + (textwrap.indent(textwrap.dedent(dlq), " " * 4) if dlq else "")
        + textwrap.dedent(quality)
    )


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the first line of ``path`` holding ``text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def codes(run: CliRun) -> list[str]:
    doc = run.doc
    if "manifests" in doc:
        return [e["code"] for m in doc["manifests"] for e in m["errors"]]
    return [doc["error"]["code"]] if doc.get("error") else []


# --- 4. quarantine and warn load canonical forms only, unless `coercion: safe` ---------------


QUARANTINE_INT = """\
    enforcement: quarantine
    {coercion}
    columns:
      id: {{type: integer, nullable: false}}
      n: {{type: integer}}
"""


def test_quarantine_sends_a_non_canonical_integer_to_the_dlq(project: Project) -> None:
    project.write(manifest(QUARANTINE_INT.format(coercion="")), "id,n\n1,7\n2,1e2\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1, 7)]
    assert project.dlq_reasons() == {"schema.type_mismatch": 1}


def test_quarantine_with_coercion_safe_loads_the_repaired_value(project: Project) -> None:
    project.write(manifest(QUARANTINE_INT.format(coercion="coercion: safe")), "id,n\n1,7\n2,1e2\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1, 7), (2, 100)]
    assert run.doc["dlq"]["records"] == 0


def test_warn_loads_a_non_canonical_integer_as_null(project: Project) -> None:
    contract = "enforcement: warn\ncolumns: {id: {type: integer}, n: {type: integer}}\n"
    project.write(manifest(contract), "id,n\n1,1e2\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1, None)]
    assert run.doc["rows"]["warned"] == 1


def test_coercion_none_contradicts_coerce(project: Project) -> None:
    contract = "enforcement: coerce\ncoercion: none\ncolumns: {id: {type: integer}}\n"
    project.write(manifest(contract), "id\n1\n")
    run = project.validate()
    assert run.exit_code == 2
    # The default strategy (append) is refused with coerce too; every error is reported.
    assert sorted(codes(run)) == ["DPONE_MANIFEST_COERCE_APPEND", "DPONE_MANIFEST_COERCION"]
    [error] = [e for e in run.doc["manifests"][0]["errors"] if e["code"].endswith("COERCION")]
    assert error["line"] == line_of(project.manifest, "coercion:")


# --- 5. required_columns is about the source's real columns ----------------------------------


def test_required_columns_fails_when_the_source_lacks_the_column(project: Project) -> None:
    contract = "enforcement: quarantine\ncolumns: {id: {type: integer}, amount: {type: float}}\n"
    quality = "quality:\n  assertions:\n    required_columns: [amount]\n"
    project.write(manifest(contract, quality), "id\n1\n2\n")
    run = project.run()
    assert run.exit_code == 1
    assert codes(run) == ["DPONE_ASSERTION_FAILED"]
    assert run.doc["sink"]["committed"] is False
    assert not (project.root / ".dpone" / "firsthour.duckdb").exists() or project.rows(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 't'"
    ) == [(0,)]


def test_required_columns_passes_a_present_column_of_nulls(project: Project) -> None:
    contract = "enforcement: quarantine\ncolumns: {id: {type: integer}, amount: {type: string}}\n"
    quality = "quality:\n  assertions:\n    required_columns: [amount]\n"
    project.write(manifest(contract, quality), "id,amount\n1,\n2,2.5\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1, ""), (2, "2.5")]


# --- 6. a row diverted by an assertion is not shown to later ones ----------------------------


def test_a_duplicate_quarantined_by_unique_columns_does_not_reach_a_fail_predicate(
    project: Project,
) -> None:
    (project.root / "rules.py").write_text(
        "seen = set()\n"
        "def first_time(row):\n"
        "    # fails on a second sight of the id: only a duplicate would be shown twice\n"
        "    if row['id'] in seen:\n        return False\n"
        "    seen.add(row['id'])\n    return True\n"
    )
    contract = "enforcement: quarantine\ncolumns: {id: {type: integer}, v: {type: string}}\n"
    quality = """\
        quality:
          assertions:
            unique_columns: {value: [id], on_failure: quarantine}
            custom:
              - {predicate: "rules:first_time", on_failure: fail}
        """
    project.write(manifest(contract, quality), "id,v\n1,a\n2,b\n1,c\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1, "a"), (2, "b")]
    assert project.dlq_reasons() == {"quality.rule_failed": 1}
    evidence = json.loads((project.root / run.doc["evidence"]).read_text())
    verdicts = {a["name"]: (a["verdict"], a["observed_rows"]) for a in evidence["assertions"]}
    assert verdicts["unique_columns"] == ("quarantined", 3)
    assert verdicts["custom:rules:first_time"] == ("passed", 2)


# --- 7. unique_columns keys are injective -----------------------------------------------------


def test_unique_columns_keys_do_not_collide(project: Project) -> None:
    contract = "enforcement: quarantine\ncolumns: {a: {type: string}, b: {type: string}}\n"
    quality = (
        "quality:\n  assertions:\n    unique_columns: {value: [a, b], on_failure: quarantine}\n"
    )
    # "x|y","z" vs "x","y|z" with the old separator; NULL,NULL vs the old NULL stand-in.
    csv = 'a,b\n"x\x1fy",z\nx,"y\x1fz"\n,\n"\x00","\x00"\n,\n'
    project.manifest.write_text(manifest(contract, quality))
    (project.root / "data.csv").write_text(csv)
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert run.doc["rows"]["loaded"] == 4
    assert project.dlq_reasons() == {"quality.rule_failed": 1}  # the second NULL,NULL only


# --- 8. dlq.enabled: false is honoured or refused, never ignored -----------------------------


@pytest.mark.parametrize(
    ("contract", "quality"),
    [
        ("enforcement: quarantine\n", ""),
        (
            "enforcement: strict\n",
            "quality:\n  assertions:\n    unique_columns: {value: [id], on_failure: quarantine}\n",
        ),
        (
            "enforcement: strict\n",
            "quality:\n  assertions:\n    on_failure: quarantine\n    unique_columns: [id]\n",
        ),
    ],
)
def test_disabling_the_dlq_while_rows_may_be_quarantined_is_refused(
    project: Project, contract: str, quality: str
) -> None:
    project.write(manifest(contract, quality, dlq="dlq: {enabled: false}\n"), "id\n1\n")
    run = project.validate()
    assert run.exit_code == 2
    assert codes(run) == ["DPONE_MANIFEST_DLQ_DISABLED"]
    error = run.doc["manifests"][0]["errors"][0]
    assert error["line"] == line_of(project.manifest, "enabled: false")
    assert error["pointer"] == "/sink/options/dlq/enabled"
    assert dpone("run", str(project.manifest)).exit_code == 2


@pytest.mark.parametrize("mode", ["strict", "warn"])  # coerce: tests/runtime/scenarios.py
def test_a_disabled_dlq_leaves_no_dlq_folder(project: Project, mode: str) -> None:
    contract = f"enforcement: {mode}\ncolumns: {{id: {{type: integer}}}}\n"
    project.write(manifest(contract, dlq="dlq: {enabled: false}\n"), "id\n1\n2\n")
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert project.rows() == [(1,), (2,)]
    assert run.doc["dlq"]["directory"] is None
    assert not (project.root / ".dpone" / "dlq").exists()


# --- 9. overlapping folders, NUL bytes, a folder that is not a DLQ store, the examples -------


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        (".dpone", "is the work_dir itself"),
        (".dpone/state", "overlaps the work_dir's state/ folder"),
        (".dpone/runs/dlq", "overlaps the work_dir's runs/ folder"),
        (".dpone/evidence", "overlaps the work_dir's evidence/ folder"),
        (".", "contains the work_dir"),
    ],
)
def test_a_dlq_directory_overlapping_the_work_dir_is_refused(
    project: Project, directory: str, message: str
) -> None:
    dlq = f"dlq: {{directory: {directory!r}}}\n"
    project.write(manifest("enforcement: quarantine\n", dlq=dlq), "id\n1\n")
    run = project.validate()
    assert run.exit_code == 2
    [error] = run.doc["manifests"][0]["errors"]
    assert error["code"] == "DPONE_MANIFEST_PATH_OVERLAP"
    assert message in error["message"]
    assert error["line"] == line_of(project.manifest, "directory:")
    assert error["pointer"] == "/sink/options/dlq/directory"
    assert error["fixes"]


def test_a_nul_byte_in_a_path_is_a_validation_error(project: Project) -> None:
    project.write(manifest("enforcement: strict\n"), "id\n1\n")
    text = project.manifest.read_text().replace("path: data.csv", 'path: "data\\0.csv"')
    project.manifest.write_text(text)
    for command in ("validate", "run"):
        run = dpone(command, str(project.manifest), "--format", "json")
        assert run.exit_code == 2
        assert "DPONE_MANIFEST_NUL_BYTE" in run.stdout
        assert "DPONE_INTERNAL" not in run.stdout + run.stderr


def test_dlq_verify_refuses_a_folder_that_is_not_a_dlq_store(project: Project) -> None:
    project.write(manifest("enforcement: strict\n"), "id\n1\n")
    run = dpone("ops", "dlq", "verify", "--dir", str(project.root), "--format", "json")
    assert run.exit_code == 2
    assert run.doc["code"] == "DPONE_DLQ_NOT_A_STORE"
    empty = project.root / "empty"
    empty.mkdir()
    assert dpone("ops", "dlq", "verify", "--dir", str(empty)).exit_code == 0
    missing = dpone("ops", "dlq", "verify", "--dir", str(project.root / "nope"), "--format", "json")
    assert (missing.exit_code, missing.doc["code"]) == (2, "DPONE_DLQ_DIR_NOT_FOUND")


@contextlib.contextmanager
def demo_api(manifest: Path) -> Iterator[dict[str, str]]:
    """The example's own demo API (demo_server.py next to a rest_api manifest) on a free port,
    the manifest pointed at it; nothing for other examples. Yields the run's environment."""
    server = manifest.parent / "demo_server.py"
    if not server.exists():
        yield {}
        return
    port = free_port()
    text = manifest.read_text()
    manifest.write_text(text.replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    env = {"DEMO_API_TOKEN": "example-token"}
    proc = subprocess.Popen(
        [sys.executable, str(server), "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(listening(port), "the example's demo API", process=proc)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def example_folders() -> list[str]:
    return sorted(p.parent.name for p in EXAMPLES.glob("*/manifest.yaml"))


def test_every_example_is_tested() -> None:
    folders = {p.name for p in EXAMPLES.iterdir() if p.is_dir()} - {"invalid"}
    assert folders == set(example_folders())


@pytest.mark.parametrize("example", example_folders())
def test_every_example_runs(
    request: pytest.FixtureRequest, tmp_path: Path, example: str, pg_schema: str, pg_url: str
) -> None:
    """Each example from a copy of the examples folder (some share data files) exits 0.
    PostgreSQL examples name their server as ${DPONE_PG_URL}; their dataset becomes a schema
    of this test's own, so parallel runs never share a table. An S3 example runs against the
    local S3 server (tests/support/s3server.py), its bucket filled by its own upload.py as its
    comments tell a user to."""
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy, ignore=shutil.ignore_patterns(".dpone", "out"))
    target = copy / example / "manifest.yaml"
    text = target.read_text()
    if "type: postgres" in text:
        target.write_text(re.sub(r"(?m)^(\s+dataset:) \w+", rf"\1 {pg_schema}", text))
    env = {PG_URL_VARIABLE: pg_url}
    if "s3://" in text:
        server = request.getfixturevalue("s3_server")
        env |= {**server.env(), "DPONE_S3_ENDPOINT": server.endpoint}
        upload = subprocess.run(
            [sys.executable, str(target.parent / "upload.py")],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=False,
        )
        assert upload.returncode == 0, upload.stderr
    with demo_api(target) as api_env:
        run = dpone("run", str(target), "--format", "json", env={**env, **api_env})
    assert run.exit_code == 0, run.stdout + run.stderr
    assert run.doc["status"] == "succeeded"
    assert run.doc["rows"]["loaded"] > 0


# --- SPEC §7: schema changes in the evidence and the run report ------------------------------


def test_schema_changes_name_the_table_created_then_the_columns_added(project: Project) -> None:
    contract = """\
        enforcement: quarantine
        columns: {id: {type: integer}}
        """
    inference = "type_inference: {conflict_policy: variant_column}\n"
    project.write(manifest(contract, dlq=inference), "id,n\n1,5\n")
    first = project.run()
    assert first.exit_code == 0, first.stdout
    table = {"change": "table_created", "table": "main.t", "column": None, "type": None}
    assert first.doc["schema_changes"] == [table]

    (project.root / "data.csv").write_text("id,n,note\n2,x,hello\n")
    second = project.run()
    assert second.exit_code == 0, second.stdout
    changes = {(c["change"], c["column"], c["type"]) for c in second.doc["schema_changes"]}
    # Column names are schema: artifacts show the header's names as written (docs/sinks.md).
    assert changes == {
        ("column_added", "note", "string"),
        ("variant_column_created", "__dpone__nc__n", "string"),
    }
    evidence = json.loads((project.root / second.doc["evidence"]).read_text())
    assert evidence["schema_changes"] == second.doc["schema_changes"]
    markdown = (project.root / second.doc["evidence"]).with_suffix(".md").read_text()
    assert "| variant_column_created | main.t | __dpone__nc__n | string |" in markdown
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    assert schema_errors(second.doc, "dpone.run.v1") == []
    assert project.rows("SELECT id, n, note, __dpone__nc__n FROM main.t ORDER BY id") == [
        (1, 5, None, None),
        (2, None, "hello", "x"),
    ]
    (project.root / "data.csv").write_text("id,n,note,extra\n3,4,x,y\n")
    text = dpone("run", str(project.manifest))
    assert text.exit_code == 0
    assert "schema     main.t extra string: column added" in text.stdout


# --- type inference reads sample_rows rows across chunks -------------------------------------


@pytest.mark.parametrize(
    ("sample_rows", "loaded"), [(10, [("1",), ("2",), ("x",)]), (2, [(1,), (2,)])]
)
def test_type_inference_samples_rows_across_chunks(
    project: Project, sample_rows: int, loaded: list[tuple[Any, ...]]
) -> None:
    contract = "enforcement: quarantine\ncolumns: {id: {type: integer}}\n"
    inference = f"type_inference: {{sample_rows: {sample_rows}}}\n"
    project.write(manifest(contract, dlq=inference), "id,n\n1,1\n2,2\n3,x\n")
    text = "runtime: {chunk_size: 2}\n" + project.manifest.read_text()
    project.manifest.write_text(text)
    run = project.run()
    assert run.exit_code == 0, run.stdout
    assert run.doc["rows"]["chunks"] == 2
    # 10 rows: the sample spans both chunks and sees "x", so n is text; 2 rows: n is integer
    # and the third row breaks it.
    assert project.rows("SELECT n FROM main.t ORDER BY id") == loaded


# --- masked keeps the shape of a nested value ------------------------------------------------


def test_masked_dlq_payload_keeps_the_shape_of_nested_json(project: Project) -> None:
    from dpone.dlq.store import DlqStore

    (project.root / "d.jsonl").write_text(
        '{"id": 1, "p": {"a": [1, {"b": "x"}]}}\n{"id": "bad", "p": {"a": [2, {"b": "y"}]}}\n'
    )
    contract = "enforcement: quarantine\ncolumns: {id: {type: integer}, p: {type: json}}\n"
    jsonl = "{type: file, format: jsonl, path: d.jsonl}"
    text = manifest(contract, dlq="dlq: {pii_policy: masked}\n", source=jsonl)
    project.manifest.write_text(text)
    run = project.run()
    assert run.exit_code == 0, run.stdout
    store = DlqStore(project.root / ".dpone" / "dlq")
    [record] = store.iter_records(run.doc["dlq"]["run_id"])
    redacted = "[REDACTED]"
    assert record.payload.value == {"id": redacted, "p": {"a": [redacted, {"b": redacted}]}}
    assert '"y"' not in json.dumps(record.to_json()["payload"])


# --- dpone run --evolution: run option > manifest > default ----------------------------------


def test_run_evolution_option_overrides_the_manifest(project: Project) -> None:
    contract = (
        "enforcement: quarantine\ncolumns: {id: {type: integer}}\nevolution: {columns: freeze}\n"
    )
    project.write(manifest(contract), "id\n1\n")
    path = str(project.manifest)
    first = dpone("run", path, "--evolution", "freeze", "--format", "json")
    assert (first.exit_code, codes(first)) == (1, ["DPONE_SCHEMA_FROZEN"])  # tables frozen
    assert dpone("run", path, "--format", "json").exit_code == 0

    (project.root / "data.csv").write_text("id,extra\n2,a\n")
    frozen = dpone("run", path, "--format", "json")  # the manifest freezes columns
    assert (frozen.exit_code, codes(frozen)) == (1, ["DPONE_SCHEMA_FROZEN"])
    dropped = dpone("run", path, "--evolution", "columns=discard_value", "--format", "json")
    assert dropped.exit_code == 0, dropped.stdout
    assert project.rows() == [(1,), (2,)]
    evolved = dpone("run", path, "--evolution", "tables=evolve,columns=evolve", "--format", "json")
    assert evolved.exit_code == 0, evolved.stdout
    assert project.rows("SELECT id, extra FROM main.t ORDER BY id") == [
        (1, None),
        (2, None),
        (2, "a"),
    ]


@pytest.mark.parametrize("option", ["sometimes", "rows=freeze", "columns=melt", "columns"])
def test_a_bad_evolution_option_is_a_usage_error(project: Project, option: str) -> None:
    project.write(manifest("enforcement: strict\n"), "id\n1\n")
    run = dpone("run", str(project.manifest), "--evolution", option, "--format", "json")
    assert run.exit_code == 2
    assert run.doc["code"] == "DPONE_USAGE_EVOLUTION"
    assert run.doc["fixes"]
    assert not (project.root / ".dpone").exists()  # nothing read, nothing written
