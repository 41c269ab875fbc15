"""Filesystem boundaries: nothing dpone keeps below the work dir or a sink folder is reached
through a link, the pipeline lock cannot be sidestepped, wide and odd inputs end typed.

Each attack runs through the CLI (``python -m dpone``) on a project in ``tmp_path``, then
asserts the typed ``DPONE_*`` error, that nothing outside the folders dpone may write
changed, and that an honest run works once the planted thing is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.security.test_read_back import (
    PIPELINE,
    assert_succeeds,
    dpone,
    error_of,
    make_project,
    run,
    snapshot,
)
from tests.support.processes import CliRun, dpone_subprocess

WORK = ".dpone"


def victim_tree(root: Path) -> Path:
    """A folder outside the project with sub-folders and files, as a target for links."""
    victim = root / "victim"
    for sub in ("keep_a", "keep_b/nested", "01EVIL000000000000000000LD"):
        (victim / sub).mkdir(parents=True)
        (victim / sub / "data.txt").write_text(sub)
    (victim / "top.txt").write_text("top")
    return victim


def assert_refused(result: CliRun, code: str = "DPONE_PATH_IS_SYMLINK") -> dict[str, object]:
    assert result.exit_code != 0, result.stdout + result.stderr
    error = error_of(result)
    assert error["code"] == code, error
    return error


def table_rows(project: Path) -> int:
    import pyarrow.parquet as pq

    files = sorted((project / "lake" / "ds" / "t").glob("*.parquet"))
    return sum(pq.read_metadata(f).num_rows for f in files)


# --- 1: the sink's staging folder -----------------------------------------------------------


@pytest.mark.parametrize("first_run", [True, False], ids=["fresh", "after_a_run"])
def test_a_symlinked_staging_folder_deletes_nothing_outside_the_sink(
    tmp_path: Path, first_run: bool
) -> None:
    project = make_project(tmp_path)
    if first_run:
        (project / "lake").mkdir()
    else:
        assert_succeeds(run(project))
    victim = victim_tree(tmp_path)
    before = snapshot(victim)
    staging = project / "lake" / "_dpone_staging"
    if staging.exists():
        staging.rmdir()
    staging.symlink_to(victim, target_is_directory=True)

    error = assert_refused(run(project))
    assert error["path"] == "_dpone_staging"
    assert snapshot(victim) == before  # every sub-folder is still there

    staging.unlink()  # as the fix says: move the link aside
    doc = assert_succeeds(run(project))
    assert doc["rows"]["loaded"] == 2
    assert snapshot(victim) == before


@pytest.mark.parametrize(
    "folder",
    [
        f"{WORK}/runs",
        f"{WORK}/state",
        f"{WORK}/evidence",
        f"{WORK}/dlq",
        f"{WORK}/scaleout",
        f"{WORK}/dlt",
        "lake/_dpone_loads",
        "lake/ds",
        "lake/ds/t",
    ],
)
def test_a_link_where_dpone_keeps_a_folder_is_refused(tmp_path: Path, folder: str) -> None:
    project = make_project(tmp_path)
    assert_succeeds(run(project))
    victim = victim_tree(tmp_path)
    link = project / folder
    moved = link.with_name(link.name + ".real")
    if link.exists():
        link.rename(moved)  # the real folder moved aside, a link in its place
    link.parent.mkdir(parents=True, exist_ok=True)
    before = snapshot(victim)
    link.symlink_to(victim, target_is_directory=True)

    error = assert_refused(run(project))
    assert folder.endswith(str(error["path"]))
    assert snapshot(victim) == before

    link.unlink()
    if moved.exists():
        moved.rename(link)
    assert_succeeds(run(project))
    assert snapshot(victim) == before


def test_the_work_dir_and_the_sink_folder_themselves_may_be_links(tmp_path: Path) -> None:
    """The user chose them: followed once, with everything below them dpone's own."""
    project = make_project(tmp_path)
    real_work, real_lake = tmp_path / "real_work", tmp_path / "real_lake"
    real_work.mkdir()
    real_lake.mkdir()
    (project / WORK).symlink_to(real_work, target_is_directory=True)
    (project / "lake").symlink_to(real_lake, target_is_directory=True)
    assert_succeeds(run(project))
    assert (real_work / "state" / f"{PIPELINE}.json").is_file()
    assert list((real_lake / "ds" / "t").glob("*.parquet"))


# --- 12: the pipeline lock ------------------------------------------------------------------


def test_a_folder_in_place_of_the_lock_is_a_typed_refusal(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    lock = project / WORK / "runs" / f"{PIPELINE}.lock"
    lock.mkdir(parents=True)
    error = assert_refused(run(project))
    assert error["path"] == f"runs/{PIPELINE}.lock"
    assert not (project / "lake").exists()  # nothing began
    lock.rmdir()
    assert_succeeds(run(project))


def test_a_link_in_place_of_the_lock_is_not_followed(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    target = tmp_path / "outside.txt"
    target.write_text("precious")
    target.chmod(0o666)
    lock = project / WORK / "runs" / f"{PIPELINE}.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(target)
    assert_refused(run(project))
    assert target.read_text() == "precious"
    assert target.stat().st_mode & 0o777 == 0o666
    lock.unlink()
    assert_succeeds(run(project))


HOLD_SOURCE = textwrap.dedent(
    """
    \"\"\"Test-only: a source that holds the run until the test lets it go (SEC_HOLD set).\"\"\"
    import os
    import time
    from pathlib import Path

    HERE = Path(__file__).parent


    def rows():
        if os.environ.get("SEC_HOLD"):
            (HERE / "started").touch()
            deadline = time.monotonic() + 120
            while not (HERE / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        yield {"id": 1, "name": "a"}
        yield {"id": 2, "name": "b"}
    """
)


def python_project(root: Path, source: str, *, runtime: str = "") -> Path:
    project = root / "proj"
    project.mkdir(parents=True)
    (project / "rows_src.py").write_text(source)
    (project / "manifest.yaml").write_text(
        f"""name: {PIPELINE}
{runtime}source: {{type: python, callable: "rows_src:rows"}}
sink:
  type: filesystem
  path: lake
  dataset: ds
  table: t
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer}}
"""
    )
    return project


def test_unlinking_the_lock_under_a_run_does_not_let_two_runs_commit(tmp_path: Path) -> None:
    project = python_project(tmp_path, HOLD_SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    holder = subprocess.Popen(
        [sys.executable, "-m", "dpone", "run", "manifest.yaml", "--format", "json"],
        cwd=project,
        env={**env, "SEC_HOLD": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (project / "started").exists():
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the held run never started reading"
            time.sleep(0.02)
        (project / WORK / "runs" / f"{PIPELINE}.lock").unlink()  # the attack

        second = dpone(project, "run", "manifest.yaml")  # locks a fresh file
        (project / "go").touch()
        out, err = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    first = CliRun(holder.returncode, out, err)

    outcomes = sorted([first.exit_code, second.exit_code])
    assert outcomes[0] == 0, (first, second)  # exactly one succeeded
    assert outcomes[1] != 0, (first, second)
    assert second.exit_code == 0, second  # the second run locked a fresh file and committed
    assert error_of(first)["code"] == "DPONE_PIPELINE_LOCK_LOST"  # the first stopped before
    assert len(list((project / "lake" / "_dpone_loads").glob("*.json"))) == 1
    assert table_rows(project) == 2  # committed once, not twice
    assert_succeeds(dpone(project, "run", "manifest.yaml"))


# --- 10: wide inputs ------------------------------------------------------------------------


def _wide_csv(path: Path, columns: int, rows: int = 2) -> None:
    header = ",".join(["id", *(f"c{i}" for i in range(columns - 1))])
    body = "\n".join(",".join([str(r), *("x" * (columns - 1))]) for r in range(rows))
    path.write_text(header + "\n" + body + "\n")


def test_a_csv_of_100000_columns_ends_at_once_with_a_typed_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    _wide_csv(project / "data" / "a.csv", 100_000)
    error = assert_refused(run(project), "DPONE_SOURCE_TOO_MANY_COLUMNS")
    assert "10000" in str(error["message"])
    assert not list(project.glob("lake/ds/t/*.parquet"))


def test_jsonl_objects_of_100000_keys_end_at_once_with_a_typed_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    manifest = project / "manifest.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "format: csv, path: data/*.csv", "format: jsonl, path: data/*.jsonl"
        )
    )
    row = {"id": 1, **{f"k{i}": "v" for i in range(100_000)}}
    (project / "data" / "a.jsonl").write_text(json.dumps(row) + "\n")
    assert_refused(run(project), "DPONE_SOURCE_TOO_MANY_COLUMNS")


def test_jsonl_keys_count_together_across_the_objects_of_a_chunk(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    manifest = project / "manifest.yaml"
    text = manifest.read_text().replace(
        "format: csv, path: data/*.csv", "format: jsonl, path: data/*.jsonl"
    )
    manifest.write_text(text.replace("sink:", "runtime: {max_columns: 5}\nsink:"))
    lines = [json.dumps({"id": i, f"k{i}": "v"}) for i in range(6)]  # 2 keys each, 7 in all
    (project / "data" / "a.jsonl").write_text("\n".join(lines) + "\n")
    error = assert_refused(run(project), "DPONE_SOURCE_TOO_MANY_COLUMNS")
    assert "up to line 5" in str(error["message"])


def test_a_wide_but_allowed_csv_completes(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    _wide_csv(project / "data" / "a.csv", 5_000, rows=20)
    doc = assert_succeeds(run(project))
    assert doc["rows"]["loaded"] == 20


def test_max_columns_is_a_manifest_option_for_every_source(tmp_path: Path) -> None:
    source = 'def rows():\n    yield {"id": 1, "a": 1, "b": 2, "c": 3}\n'
    project = python_project(tmp_path, source, runtime="runtime: {max_columns: 3}\n")
    error = assert_refused(dpone(project, "run", "manifest.yaml"), "DPONE_SOURCE_TOO_MANY_COLUMNS")
    assert "more than 3 columns" in str(error["message"])
    manifest = project / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("max_columns: 3", "max_columns: 4"))
    assert_succeeds(dpone(project, "run", "manifest.yaml"))


def test_the_default_cap_is_the_schemas_default() -> None:
    from dpone.manifest.specs import DEFAULT_MAX_COLUMNS
    from dpone.published import load_schema

    runtime = load_schema("dpone.manifest.v1")["properties"]["runtime"]["properties"]
    assert runtime["max_columns"]["default"] == DEFAULT_MAX_COLUMNS == 10_000


WIDE_SOURCE = textwrap.dedent(
    """
    \"\"\"Test-only: one chunk of 9,000 text columns; says when it is handed over.\"\"\"
    from pathlib import Path

    import pyarrow as pa

    HERE = Path(__file__).parent


    def rows():
        n = 300
        columns = {"id": pa.array(range(n))}
        for i in range(8_999):
            columns[f"c{i}"] = pa.array([f"2024-01-{1 + r % 28:02d}" for r in range(n)])
        batch = pa.RecordBatch.from_pydict(columns)
        (HERE / "yielded").touch()
        yield batch
    """
)


def test_sigterm_during_a_long_enforcement_exits_130(tmp_path: Path) -> None:
    project = python_project(tmp_path, WIDE_SOURCE, runtime="runtime: {chunk_size: 1000}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpone", "run", "manifest.yaml", "--format", "json"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (project / "yielded").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the source never yielded"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)  # lands while the 9,000 columns are enforced
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert "run.stopping" in err
    assert not list((project / "lake").glob("ds/t/*.parquet"))


# --- 11: undecodable JSON strings -----------------------------------------------------------


@pytest.mark.parametrize("enforcement", ["quarantine", "strict"])
def test_a_lone_surrogate_is_a_decode_failure_of_its_line(tmp_path: Path, enforcement: str) -> None:
    project = make_project(tmp_path, enforcement=enforcement)
    manifest = project / "manifest.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "format: csv, path: data/*.csv", "format: jsonl, path: data/*.jsonl"
        )
    )
    lines = [
        '{"id": 1, "name": "a"}',
        '{"id": 2, "name": "\\ud800"}',
        '{"id": 3, "name": "\\ud83d\\ude00"}',
    ]
    (project / "data" / "a.jsonl").write_text("\n".join(lines) + "\n")
    result = run(project)
    if enforcement == "quarantine":
        doc = assert_succeeds(result)
        assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (2, 1)
        evidence = next((project / WORK / "evidence").rglob("data_contract_evidence.json"))
        reasons = json.loads(evidence.read_text())["dlq"]["reasons"]
        assert reasons == {"source.decode_failed": 1}
    else:
        error = assert_refused(result, "DPONE_SOURCE_DECODE_FAILED")
        assert error["line"] == 2


# --- 13: run ids and file modes -------------------------------------------------------------


@pytest.mark.parametrize("args", [["--run-id", "-rf"], ["--run-id=-rf"]], ids=["spaced", "joined"])
def test_a_run_id_starting_with_a_dash_is_refused(tmp_path: Path, args: list[str]) -> None:
    project = make_project(tmp_path)
    result = run(project, *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert json.loads(result.stdout)["code"] in ("DPONE_USAGE",)
    assert not (project / WORK).exists()
    assert not (project / "lake").exists()


def test_the_api_refuses_a_run_id_starting_with_a_dash(tmp_path: Path) -> None:
    import dpone as api
    from dpone.errors import UsageError

    project = make_project(tmp_path)
    with pytest.raises(UsageError, match="not starting with"):
        api.run(project / "manifest.yaml", run_id="-rf")
    assert not (project / WORK).exists()


def test_files_are_0640_and_folders_0750_under_a_permissive_umask(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    previous = os.umask(0o002)
    try:
        result = dpone_subprocess(
            ["run", "manifest.yaml", "--format", "json"], cwd=project, env={}, timeout=120
        )
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        os.umask(previous)
    seen = 0
    for top in (project / WORK, project / "lake"):
        assert top.stat().st_mode & 0o777 == 0o750, top
        for folder, dirs, files in os.walk(top):
            for name in dirs:
                assert (Path(folder) / name).stat().st_mode & 0o777 == 0o750, f"{folder}/{name}"
            for name in files:
                mode = (Path(folder) / name).stat().st_mode & 0o777
                assert mode == 0o640, f"{folder}/{name}: {oct(mode)}"
                seen += 1
    assert seen >= 8  # evidence (2), state, journal, lock, DLQ index/segment, marker, Parquet
