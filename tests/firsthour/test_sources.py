"""File sources end to end through the CLI: where the files are (relative, ``..``, absolute,
``~``, globs) and what a dirty line does (quarantined or failing the run, never mis-parsed).

Every test writes a manifest and its data, data outside the manifest's folder where the path
form calls for it, runs ``dpone validate`` / ``dpone run`` and checks the rows in the DuckDB
file, the DLQ records and the exit code.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.dlq.model import DlqRecord
from dpone.dlq.refs import file_line_refs, file_ref
from dpone.dlq.store import DlqStore
from dpone.manifest.compiler import compile_manifest
from dpone.ops.replay import RowStillRejected
from dpone.ops.replay.binding import bind
from dpone.ops.replay.errors import ReplayRefOutsideSource
from tests.support.processes import CliRun

CANARY = "canary-9f3b"  # a value that must never leave the data files


@dataclass
class Project:
    """A manifest folder (``tmp/project``) and the run's environment."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def manifest(self) -> Path:
        return self.project / "manifest.yaml"

    def write_manifest(
        self,
        path: str,
        *,
        fmt: str = "csv",
        enforcement: str = "quarantine",
        pii_policy: str = "reference_only",
        options: dict[str, Any] | None = None,
        chunk_size: int = 1000,
    ) -> Path:
        source: dict[str, Any] = {"type": "file", "format": fmt, "path": path}
        if options:
            source["options"] = options
        doc = {
            "name": "orders_paths",
            "runtime": {"chunk_size": chunk_size},
            "source": source,
            "sink": {
                "type": "duckdb",
                "table": "orders",
                "options": {
                    "schema_contract": {
                        "enforcement": enforcement,
                        "columns": {
                            "id": {"type": "integer", "nullable": False},
                            "name": {"type": "string"},
                        },
                    },
                    "dlq": {"pii_policy": pii_policy},
                },
            },
        }
        self.project.mkdir(parents=True, exist_ok=True)
        self.manifest.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        return self.manifest

    def cli(self, *args: str) -> CliRun:
        result = CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)
        return CliRun(result.exit_code, result.stdout, result.stderr)

    def validate(self) -> CliRun:
        return self.cli("validate", str(self.manifest), "--format", "json")

    def run(self) -> CliRun:
        result = self.cli("run", str(self.manifest), "--format", "json")
        assert "Traceback" not in result.stderr
        assert CANARY not in result.stdout + result.stderr
        return result

    @property
    def dlq(self) -> DlqStore:
        return DlqStore(self.project / ".dpone" / "dlq")

    def records(self, run_id: str) -> list[DlqRecord]:
        return list(self.dlq.iter_records(run_id))

    def loaded(self) -> list[tuple[Any, ...]]:
        database = self.project / ".dpone" / "orders_paths.duckdb"
        with duckdb.connect(str(database), read_only=True) as con:
            return con.sql("SELECT id, name FROM dpone.orders ORDER BY id").fetchall()

    def tables(self) -> list[str]:
        database = self.project / ".dpone" / "orders_paths.duckdb"
        if not database.exists():
            return []
        with duckdb.connect(str(database), read_only=True) as con:
            return [row[0] for row in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()]

    def evidence_text(self) -> str:
        return "".join(p.read_text() for p in (self.project / ".dpone").rglob("*evidence*.json"))


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # for the replay resolver, bound in this process
    return Project(tmp_path, {"HOME": str(home)})


ORDERS = f"id,name\n1,a\nnot-a-number,{CANARY}\n3,c\n"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- paths -------------------------------------------------------------------------------------

# (file to create, relative to tmp_path, or "~" for $HOME; the manifest's path; its spelling of
# the file). ``{root}`` is tmp_path.
PATH_MATRIX = {
    "relative": ("project/data/orders.csv", "data/orders.csv", "data/orders.csv"),
    "dotdot": ("shared/orders.csv", "../shared/orders.csv", "../shared/orders.csv"),
    "absolute": ("landing/orders.csv", "{root}/landing/orders.csv", "{root}/landing/orders.csv"),
    "home": ("home/inbox/orders.csv", "~/inbox/orders.csv", "~/inbox/orders.csv"),
    "glob_in_folder": (
        "shared/2026-01/orders.csv",
        "../shared/2026-*/orders.csv",
        "../shared/2026-01/orders.csv",
    ),
    "glob_in_name": ("shared/orders.csv", "./../shared//ord*.csv", "../shared/orders.csv"),
}


@pytest.mark.parametrize("case", sorted(PATH_MATRIX))
def test_path_forms_run_quarantine_and_round_trip_through_replay(proj: Project, case: str) -> None:
    where, written, spelled = (s.format(root=proj.root) for s in PATH_MATRIX[case])
    data = proj.root / where
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(ORDERS)
    proj.write_manifest(written)

    assert proj.validate().exit_code == 0
    result = proj.run()
    assert result.exit_code == 0, result.stdout
    report = result.doc
    assert report["data_outcome"] == "passed_with_quarantine"
    assert proj.loaded() == [(1, "a"), (3, "c")]
    run_id = report["dlq"]["run_id"]
    (record,) = proj.records(run_id)
    assert record.record_ref == file_ref(spelled, sha(data), 2)
    assert record.reason.code == "schema.type_mismatch"

    # Evidence names the file only as the manifest does: never a resolved machine path.
    if case != "absolute":
        assert str(proj.root) not in proj.evidence_text()

    plan = proj.cli(
        "ops",
        "quarantine-replay",
        "--dir",
        str(proj.project / ".dpone" / "dlq"),
        "--run-id",
        run_id,
        "--format",
        "json",
    )
    assert plan.exit_code == 0, plan.stdout
    (item,) = plan.doc["items"]
    assert item["record_ref"] == record.record_ref

    # The resolver finds the row again the same way (and it still fails the contract).
    binding = bind(compile_manifest(proj.manifest), run_id, env=proj.env)
    resolution = binding.resolver.resolve([record])
    assert isinstance(resolution.rejected[record.record_id], RowStillRejected)
    assert resolution.rows.num_rows == 0


def test_replay_refuses_a_record_whose_file_the_glob_does_not_match(proj: Project) -> None:
    shared = proj.root / "shared"
    shared.mkdir()
    (shared / "a.csv").write_text(ORDERS)
    proj.write_manifest("../shared/a*.csv")
    run_id = proj.run().doc["dlq"]["run_id"]
    (record,) = proj.records(run_id)

    proj.write_manifest("../shared/b*.csv")
    binding = bind(compile_manifest(proj.manifest), run_id, env=proj.env)
    with pytest.raises(ReplayRefOutsideSource) as info:
        binding.resolver.resolve([record])
    assert info.value.code == "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE"


@pytest.mark.parametrize(
    "path",
    [
        "https://example.com/orders.csv",
        "s3://bucket/landing/../orders.csv",
        "data/a\x00.csv",
        "~bob/orders.csv",
        "data/",
        "..",
        "",
    ],
)
def test_validate_refuses_what_run_would_refuse(proj: Project, path: str) -> None:
    proj.write_manifest(path)
    for result in (proj.validate(), proj.run()):
        assert result.exit_code == 2
        assert "Traceback" not in result.stderr
    detail = proj.validate().doc["manifests"][0]["errors"][0]
    # the empty path is the schema's (minLength), every other the source path check's
    assert detail["code"] in (
        "DPONE_MANIFEST_SOURCE_PATH",
        "DPONE_MANIFEST_RANGE",
        "DPONE_MANIFEST_NUL_BYTE",
    )
    assert detail["pointer"] == "/source/path"
    assert detail["line"] is not None
    assert detail["column"] is not None


def test_a_path_matching_no_file_is_a_run_time_matter(proj: Project) -> None:
    proj.write_manifest("../nowhere/*.csv")
    assert proj.validate().exit_code == 0
    result = proj.run()
    assert result.exit_code == 2
    assert result.doc["error"]["code"] == "DPONE_SOURCE_NO_FILES"


# --- dirty lines -------------------------------------------------------------------------------

DIRTY_CSV = (
    b"id,name\n"
    b"1,a\n"
    b"2,b," + CANARY.encode() + b"\n"  # line 3: three fields
    b'3,"abc\n'  # line 4: a quote never closed
    b"4,d\n"
    b"5,\xff" + CANARY.encode() + b"\n"  # line 6: not UTF-8
    b"6,f\n"
)


def quarantined_lines(proj: Project, run_id: str) -> dict[int, DlqRecord]:
    records = [r for r in proj.records(run_id) if r.reason.code == "source.decode_failed"]
    return {int(r.diagnostics.source_offset or 0): r for r in records}


def test_dirty_csv_lines_are_quarantined_and_the_rest_loads(proj: Project) -> None:
    data = proj.root / "in" / "orders.csv"
    data.parent.mkdir()
    data.write_bytes(DIRTY_CSV)
    proj.write_manifest("../in/*.csv")
    result = proj.run()
    assert result.exit_code == 0, result.stdout
    assert proj.loaded() == [(1, "a"), (4, "d"), (6, "f")]
    run_id = result.doc["dlq"]["run_id"]
    lines = quarantined_lines(proj, run_id)
    assert sorted(lines) == [3, 4, 6]
    digest = sha(data)
    for line, record in lines.items():
        assert record.record_ref == file_line_refs("../in/orders.csv", digest, [line])[0]
        assert record.payload.value is None
        assert record.replay.replayable is False
    summary = proj.cli(
        "ops", "dlq", "summary", "--dir", str(proj.project / ".dpone" / "dlq"), "--format", "json"
    )
    assert CANARY not in summary.stdout
    assert "source.decode_failed" in summary.stdout


def test_dirty_line_fails_a_strict_run_naming_file_and_line(proj: Project) -> None:
    (proj.root / "in").mkdir()
    (proj.root / "in" / "orders.csv").write_bytes(DIRTY_CSV)
    proj.write_manifest("../in/orders.csv", enforcement="strict")
    result = proj.run()
    assert result.exit_code == 1
    error = result.doc["error"]
    assert error["code"] == "DPONE_SOURCE_DECODE_FAILED"
    assert error["path"] == "../in/orders.csv"
    assert error["line"] == 3
    assert "line 3" in error["message"]
    assert proj.tables() == [] or "orders" not in proj.tables()


def test_preserve_keeps_the_raw_line_text(proj: Project) -> None:
    (proj.project / "d").mkdir(parents=True)
    (proj.project / "d" / "x.csv").write_text('id,name\n1,a\n2,"open\n3,c\n')
    proj.write_manifest("d/x.csv", pii_policy="preserve")
    result = proj.run()
    assert result.exit_code == 0
    (record,) = quarantined_lines(proj, result.doc["dlq"]["run_id"]).values()
    assert record.payload.value == {"line": '2,"open'}
    assert proj.loaded() == [(1, "a"), (3, "c")]


def test_quoted_line_breaks_load_by_default_and_newlines_in_values_false_opts_out(
    proj: Project,
) -> None:
    (proj.project / "d").mkdir(parents=True)
    (proj.project / "d" / "x.csv").write_text('id,name\n1,"two\nlines"\n2,b\n')
    proj.write_manifest("d/x.csv")
    assert proj.validate().exit_code == 0
    assert proj.run().exit_code == 0
    assert proj.loaded() == [(1, "two\nlines"), (2, "b")]

    proj.write_manifest("d/x.csv", options={"csv": {"newlines_in_values": False}})
    result = proj.run()
    assert result.exit_code == 0
    assert set(quarantined_lines(proj, result.doc["dlq"]["run_id"])) == {2, 3}


def test_a_long_row_loads_up_to_max_row_bytes(proj: Project) -> None:
    (proj.project / "d").mkdir(parents=True)
    big = "x" * (1 << 20)
    (proj.project / "d" / "x.csv").write_text(f"id,name\n1,{big}\n2,b\n")
    proj.write_manifest("d/x.csv")
    assert proj.run().exit_code == 0
    assert proj.loaded() == [(1, big), (2, "b")]

    proj.write_manifest("d/x.csv", options={"csv": {"max_row_bytes": 65536}})
    result = proj.run()
    assert result.exit_code == 1
    assert result.doc["error"]["code"] == "DPONE_SOURCE_ROW_TOO_LONG"
    assert result.doc["error"]["line"] == 2


def test_jsonl_lines_that_are_not_objects_are_quarantined(proj: Project) -> None:
    (proj.project / "d").mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    lines = ['{"id": 1, "name": "a"}', "[1, 2]", '{"id": 2, "name": ' + deep + "}", "{nope"]
    lines.append('{"id": 3, "name": "c"}')
    (proj.project / "d" / "x.jsonl").write_text("\n".join(lines) + "\n")
    proj.write_manifest("d/*.jsonl", fmt="jsonl")
    result = proj.run()
    assert result.exit_code == 0, result.stdout
    assert proj.loaded() == [(1, "a"), (3, "c")]
    assert sorted(quarantined_lines(proj, result.doc["dlq"]["run_id"])) == [2, 3, 4]


def test_corrupt_files_are_decode_failures_not_transient(proj: Project) -> None:
    data = proj.project / "d"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"id": list(range(1000)), "name": ["n"] * 1000}), data / "x.parquet")
    raw = bytearray((data / "x.parquet").read_bytes())
    for i in range(8, 200):
        raw[i] ^= 0xFF
    (data / "x.parquet").write_bytes(bytes(raw))
    proj.write_manifest("d/x.parquet", fmt="parquet")
    result = proj.run()
    assert result.exit_code == 1
    assert result.doc["error"]["code"] == "DPONE_SOURCE_DECODE_FAILED"

    (data / "x.csv.gz").write_bytes(gzip.compress(b"id,name\n1,a\n" * 5000)[:-60] + b"junk")
    proj.write_manifest("d/x.csv.gz")
    result = proj.run()
    assert result.exit_code == 1
    assert result.doc["error"]["code"] == "DPONE_SOURCE_DECODE_FAILED"


def test_an_unexpected_exception_rolls_the_run_back(
    proj: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    (proj.project / "d").mkdir(parents=True)
    rows = "".join(f"{i},n{i}\n" for i in range(1, 7))
    (proj.project / "d" / "x.csv").write_text("id,name\nbad,x\n" + rows)
    proj.write_manifest("d/x.csv", chunk_size=2)

    from dpone.runtime.stream import Stream

    calls = {"n": 0}
    original = Stream.chunk

    def flaky(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError(f"library text quoting {CANARY}")
        original(*args, **kwargs)

    monkeypatch.setattr(Stream, "chunk", flaky)
    result = proj.run()
    assert result.exit_code == 1
    doc = result.doc
    assert doc["error"]["code"] == "DPONE_INTERNAL"
    assert "ValueError" in doc["error"]["message"]
    assert doc["state"]["advanced"] is False
    run_id = doc["dlq"]["run_id"]
    assert proj.dlq.read_index(run_id).status == "aborted"
    assert not any(t.startswith("_dpone_stage_") for t in proj.tables())
    assert "orders" not in proj.tables()
    assert '"execution_status": "failed"' in proj.evidence_text().replace('":"', '": "')
