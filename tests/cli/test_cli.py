"""The CLI shell: exit codes, JSON on stdout, no tracebacks, schemas out."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone import __version__
from dpone.cli.main import cli
from dpone.published import schema_errors, schema_names
from tests.support.paths import EXAMPLES, example_manifests

ORDERS = str(EXAMPLES / "orders_csv" / "manifest.yaml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert __version__ in out


def test_validate_examples_exit_0_and_json_is_schema_valid() -> None:
    paths = [str(p) for p in example_manifests()]
    code, out, _ = run("validate", *paths, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] is True
    assert len(doc["manifests"]) == len(paths)
    assert schema_errors(doc, "dpone.validation.v1") == []


def test_validate_mixed_reports_each_and_exits_2() -> None:
    bad = str(next((EXAMPLES / "invalid").glob("*.yaml")))
    code, out, _ = run("validate", ORDERS, bad, "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert [m["valid"] for m in doc["manifests"]] == [True, False]
    assert schema_errors(doc, "dpone.validation.v1") == []


def test_plan_text_and_json() -> None:
    code, out, _ = run("plan", ORDERS)
    assert code == 0
    assert "orders_csv" in out
    assert "quarantine" in out
    code, out, _ = run("plan", ORDERS, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert schema_errors(doc, "dpone.plan.v1") == []
    assert doc["fingerprint"].startswith("sha256:")


def test_plan_text_names_the_engine_and_where_an_api_source_reads(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "name: kunden_api\n"
        "runtime: {engine: dask, dask: {n_workers: 2}}\n"
        "source:\n"
        "  type: rest_api\n"
        "  client: {base_url: 'http://127.0.0.1:9/v1/', headers: {X-KEY: '${TRIAL_KEY}'}}\n"
        "  resource: {name: kunden, endpoint: kunden}\n"
        "  incremental: {cursor_column: ts}\n"
        "sink: {type: duckdb, table: kunden}\n",
        encoding="utf-8",
    )

    code, out, _ = run("plan", str(manifest))

    assert code == 0, out
    assert "source       rest_api  http://127.0.0.1:9/v1/ resource kunden\n" in out
    assert "engine       dask  local cluster, workers 2\n" in out
    assert "incremental  ts (initial none: reads everything)\n" in out
    assert "None" not in out
    code, out, _ = run("plan", ORDERS)
    assert "engine       local\n" in out


def test_plan_redacts_secrets(tmp_path: Path, monkeypatch: object) -> None:
    manifest = EXAMPLES / "orders_postgres" / "manifest.yaml"
    code, out, _ = run("plan", str(manifest), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert "DPONE_PG_URL" in doc["secrets"]
    assert doc["manifest"]["sink"]["connection"] == "${DPONE_PG_URL}"


def test_plan_of_missing_file_is_exit_2_error_json(tmp_path: Path) -> None:
    code, out, _ = run("plan", str(tmp_path / "missing.yaml"), "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert doc["code"] == "DPONE_MANIFEST_NOT_FOUND"
    assert schema_errors(doc, "dpone.error.v1") == []


def test_multi_error_json_lists_every_error(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("name: X\nsource: {type: file}\nsink: {type: nope, table: t}\n")
    code, out, _ = run("plan", str(path), "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert doc["code"] == "DPONE_MANIFEST_INVALID"
    assert len(doc["errors"]) >= 3
    assert schema_errors(doc, "dpone.error.v1") == []


def test_usage_error_exit_2() -> None:
    code, _, err = run("validate")
    assert code == 2
    assert "Traceback" not in err


def test_schemas_list_and_export(tmp_path: Path) -> None:
    code, out, _ = run("schemas", "list", "--format", "json")
    assert code == 0
    listed = [s["name"] for s in json.loads(out)["schemas"]]
    assert listed == schema_names()
    assert {"dpone.manifest.v1", "dpone.error.v1", "dpone.plan.v1"} <= set(listed)
    code, _, _ = run("schemas", "export", str(tmp_path / "out"))
    assert code == 0
    repo = Path(__file__).resolve().parents[2] / "schemas"
    for name in listed:
        exported = tmp_path / "out" / f"{name}.schema.json"
        assert exported.read_bytes() == (repo / exported.name).read_bytes()


def test_real_process_bad_manifest_has_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: ok_name\nsource: !!python/object:os.system {}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "dpone", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "DPONE_MANIFEST_YAML_TAG" in proc.stderr
    assert f"{path}:2:9" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


CTRL_C_WHILE_IMPORTING = """
import builtins

real_import = builtins.__import__


def interrupted_import(name, *args, **kwargs):
    if name == "dpone.cli.main":
        raise KeyboardInterrupt  # what a Ctrl-C during the heavy imports looks like
    return real_import(name, *args, **kwargs)


builtins.__import__ = interrupted_import
from dpone.entry import main

main()
"""


def test_ctrl_c_while_the_cli_is_still_importing_exits_130_without_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_IMPORTING],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 130
    assert proc.stdout == ""
    assert proc.stderr == "dpone: interrupted while starting; nothing was done\n"


def test_the_console_script_and_python_m_dpone_share_the_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpone", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage: dpone" in proc.stdout
    scripts = importlib.metadata.entry_points(group="console_scripts", name="dpone")
    assert [ep.value for ep in scripts] == ["dpone.entry:main"]


def _thp_enabled(code: str) -> str:
    """The THP_enabled line of /proc/self/status of a fresh interpreter running ``code``."""
    probe = f"{code}\nprint(open('/proc/self/status').read().split('THP_enabled:')[1].split()[0])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(
    not Path("/proc/self/status").is_file()
    or "THP_enabled:" not in Path("/proc/self/status").read_text(),
    reason="no per-process transparent huge page flag here",
)
def test_the_command_opts_its_process_out_of_transparent_huge_pages() -> None:
    assert _thp_enabled("") == "1"
    assert _thp_enabled("from dpone.entry import _without_huge_pages; _without_huge_pages()") == "0"


def test_a_process_opted_out_already_is_not_opted_out_again() -> None:
    """A parent that opted out (a benchmark, a service manager) passes the flag on: the
    command then skips ctypes, whose import is part of a small run's start-up. Every machine
    the tests run on is Linux 5.0 or later, which reports the flag."""
    import ctypes

    assert "THP_enabled:" in Path("/proc/self/status").read_text(), "Linux 5.0+ reports it"

    def opt_out() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)

    probe = (
        "import sys\nfrom dpone.entry import _huge_pages_off, _without_huge_pages\n"
        "_without_huge_pages()\nprint(_huge_pages_off(), 'ctypes' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, preexec_fn=opt_out
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]
    probe = "from dpone.entry import _huge_pages_off\nassert not _huge_pages_off()"
    assert _thp_enabled(probe) == "1"
