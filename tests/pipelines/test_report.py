"""``dpone ops report``: one self-contained HTML page with the numbers of the runs, every name
escaped, no asset from anywhere, no row value; and, in a real browser, a page that renders."""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.ops.pipelines import (
    DlqRunView,
    JournalView,
    PipelineInfo,
    RunView,
    StateView,
)
from dpone.ops.report_html import GateVerdict, RetentionView, render
from dpone.published import schema_errors
from tests.support.png import read_png
from tests.support.processes import CliRun
from tests.support.project import CANARY, PIPELINE, Project, good, make_project, ts


def report(project: Project, output: Path, *args: str) -> CliRun:
    result = CliRunner().invoke(
        cli,
        ["ops", "report", "--work-dir", str(project.work_dir), "--output", str(output), *args],
        catch_exceptions=False,
    )
    run = CliRun(result.exit_code, result.stdout, result.stderr)
    if "json" in args:
        schema = "dpone.ops-report.v1" if run.exit_code == 0 else "dpone.error.v1"
        assert schema_errors(run.doc, schema) == []
    return run


def three_runs(project: Project) -> list[dict[str, object]]:
    """Three real runs in quarantine mode into DuckDB: 3 + 1 bad, 2 + 2 bad, 1 good."""
    project.write_manifest(incremental=True)
    reports = []
    project.write_csv("a.csv", [good(1), good(2), good(3), ("4", CANARY, "x1", ts(4), "")])
    reports.append(project.run())
    project.write_csv(
        "b.csv", [good(5), good(6), ("7", "n7", "x2", ts(7), ""), ("", CANARY, "1.00", ts(8), "")]
    )
    reports.append(project.run())
    project.write_csv("c.csv", [good(9)])
    reports.append(project.run())
    assert [r["exit_code"] for r in reports] == [0, 0, 0]
    return reports


@pytest.fixture
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    return make_project(request, tmp_path)


class _Assets(HTMLParser):
    """Every attribute that could fetch something (src, href, srcset, url(...))."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.found.append(tag)
        self.found += [f"{tag}[{k}]" for k, _ in attrs if k in ("src", "href", "srcset")]


def test_the_page_holds_the_numbers_of_the_runs_and_nothing_external(
    project: Project, tmp_path: Path
) -> None:
    runs = three_runs(project)
    bundles = [str(project.evidence_path(str(r["run_id"]))) for r in runs]
    # The runs quarantine some rows: the passing gate lifts the default 1% limit.
    lifted = ["--max-quarantine-ratio", "1"]
    for folder, extra in (("gate_pass", lifted), ("gate_blocked", ["--max-quarantine-ratio", "0"])):
        gate = CliRunner().invoke(
            cli,
            [
                "ops",
                "release-gate",
                *bundles,
                "--root",
                str(project.root),
                *extra,
                "--output",
                str(project.work_dir / folder),
            ],
        )
        assert gate.exit_code in (0, 1), gate.stdout
    planted = project.work_dir / "gate_planted"
    planted.mkdir()
    (planted / "release_gate.json").write_text('{"decision": "pass"}')
    output = tmp_path / "report.html"

    written = report(project, output, "--format", "json")

    assert written.exit_code == 0, written.stdout
    page = output.read_text(encoding="utf-8")
    assert written.doc["output"] == str(output)
    assert written.doc["pipelines"] == [
        {
            "pipeline": PIPELINE,
            "runs": 3,
            "dlq_records": 3,
            "dlq_bytes": written.doc["pipelines"][0]["dlq_bytes"],
        }
    ]
    for run in runs:
        rows = run["rows"]
        assert isinstance(rows, dict)
        cells = [rows[k] for k in ("read", "loaded", "quarantined", "warned", "skipped")]
        row = "".join(f'<td class="n">{n:,}</td>' for n in cells)
        assert f"<td>{run['run_id']}</td>" in page
        assert row in page, run["run_id"]
    # Rejects by reason and column, DLQ bytes per run, retention.
    assert "schema.type_mismatch: 2" in page
    assert "amount: 2" in page
    for dlq in (project.dlq_root / "runs").iterdir():
        size = sum(p.stat().st_size for p in (dlq / "segments").iterdir())
        assert f'<td class="n">{size:,}</td>' in page
    assert "would delete 0 record(s)" in page
    assert [(g["path"], g["decision"], g["bundles"]) for g in written.doc["gates"]] == [
        ("gate_blocked/release_gate.json", "blocked", 3),
        ("gate_pass/release_gate.json", "pass", 3),
        ("gate_planted/release_gate.json", "unverified", 0),
    ]
    assert "<td>gate_blocked/release_gate.json</td><td>blocked</td>" in page
    assert "table_created" in page
    # Self-contained, and no value of any row.
    assets = _Assets()
    assets.feed(page)
    assert assets.found == []
    for external in ("http://", "https://", "url(", "@import", "<script"):
        assert external not in page, external
    assert CANARY not in page


def test_a_missing_work_dir_or_a_bad_now_is_a_usage_error(project: Project, tmp_path: Path) -> None:
    project.work_dir.mkdir()
    missing = report(project, tmp_path / "r.html", "--format", "json")
    project.work_dir.rmdir()
    assert missing.exit_code == 0
    bad = report(project, tmp_path / "r.html", "--now", "yesterday", "--format", "json")
    assert bad.exit_code == 2
    assert bad.doc["code"] == "DPONE_WORK_DIR_NOT_FOUND"
    project.work_dir.mkdir()
    bad = report(project, tmp_path / "r2.html", "--now", "yesterday", "--format", "json")
    assert bad.exit_code == 2
    assert bad.doc["code"] == "DPONE_USAGE"
    assert not (tmp_path / "r2.html").exists()


def test_every_name_is_escaped() -> None:
    hostile = '<script>alert("x")</script>&'
    run = RunView(
        run_id="r1",
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:01Z",
        execution_status="succeeded",
        data_outcome="passed_with_quarantine",
        failure_code=None,
        rows={"read": 5, "loaded": 4, "quarantined": 1, "warned": 0, "skipped": 0},
        dlq_records=1,
        sink_type="duckdb",
        table=hostile,
        mode="append",
        load_id="l1",
        state_advanced=True,
        cursor_from=None,
        cursor_to=hostile,
        violations=((hostile, "schema.type_mismatch", 1),),
        schema_changes=(
            {"change": "column_added", "table": hostile, "column": hostile, "type": "string"},
        ),
    )
    info = PipelineInfo(
        name="orders",
        work_dir=hostile,
        state=StateView("ok", 1, hostile, "string", hostile, "r1", "2026-01-01T00:00:01Z"),
        journal=JournalView("ok", "finished", "r1"),
        runs=(run,),
        run_count=1,
        dlq_runs=(DlqRunView("r1", "closed", 1, 120, {"schema.type_mismatch": 1}),),
        unreadable=((hostile, "its evidence is not JSON"),),
    )
    retention = RetentionView("2026-02-01T00:00:00Z", 0, 0, {"unexpired": 1})

    page = render(hostile, [info], [GateVerdict(hostile, "pass", "t", 1, 0)], retention)

    assert "<script" not in page
    assert hostile not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: apt-get install -y --no-install-recommends chromium "
            "(.ci/run installs it)"
        )
    return found


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.browser
def test_the_page_renders_in_a_real_browser(project: Project, tmp_path: Path) -> None:
    runs = three_runs(project)
    output = tmp_path / "report.html"
    assert report(project, output).exit_code == 0
    url = output.resolve().as_uri()

    dom = _browser("--dump-dom", url)
    shot = tmp_path / "shot.png"
    drawn = _browser(f"--screenshot={shot}", "--window-size=800,1000", url)

    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"\s+", " ", dom.stdout)
    for run in runs:
        rows = run["rows"]
        assert isinstance(rows, dict)
        cells = "".join(
            f'<td class="n">{rows[k]:,}</td>' for k in ("read", "loaded", "quarantined")
        )
        assert f"<td>{run['run_id']}</td>" in text
        assert cells in text
    assert text.count("<svg") >= 4  # runs, reasons, columns, DLQ size
    assert drawn.returncode == 0, drawn.stderr[-2000:]
    width, height, channels, pixels = read_png(shot)
    assert (width, height) == (800, 1000)
    # Not blank: many pixels differ from the white page, in several colours (the bars).
    grey = pixels[0::channels]
    assert statistics.pvariance(grey[::7]) > 100
    colours = {pixels[i : i + 3] for i in range(0, len(pixels), channels * 11)}
    assert len(colours) > 20
