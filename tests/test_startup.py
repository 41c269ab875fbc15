"""The command's start-up without the garbage collector (dpone/startup.py): paused by the entry
point, frozen and turned on again once the command's modules are loaded, never touched when
dpone is a library."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpone import api, startup
from dpone.cli.output import run_command
from tests.support.project import good, make_project, ts


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    startup.resume()
    gc.unfreeze()
    if enabled:
        gc.enable()


def _manifest(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Two good rows and one whose id is not an integer, into DuckDB."""
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1), good(2), ("x", "c", "1.00", ts(1), "true")])
    return project.write_manifest()


def test_resume_without_pause_leaves_the_collector_as_it_is() -> None:
    gc.disable()
    startup.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_pause_then_resume_freezes_what_start_up_made_and_turns_the_collector_on() -> None:
    startup.pause()
    assert not gc.isenabled()
    made = [object() for _ in range(100)]
    startup.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)
    startup.resume()  # a second resume does nothing more
    assert gc.isenabled()


def test_a_paused_run_turns_the_collector_on_before_it_streams(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    startup.pause()
    plan = api.compile(_manifest(request, tmp_path))
    assert not gc.isenabled()  # the compile is start-up
    report = api.run(plan)
    assert (report.rows.loaded, report.rows.quarantined) == (2, 1)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_any_other_command_runs_its_body_with_the_collector_on() -> None:
    startup.pause()
    seen: list[bool] = []

    def body() -> int:
        seen.append(gc.isenabled())
        return 0

    with pytest.raises(SystemExit) as done:
        run_command("json", body)
    assert done.value.code == 0
    assert seen == [True]


def test_the_command_runs_with_the_collector_on_once_started(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The real entry point, in a process of its own, with probes on the compile and on the
    stream: the collector is off while the manifest compiles, on while the chunks stream."""
    manifest = _manifest(request, tmp_path)
    probe = (
        "import gc, sys\n"
        "import dpone.api as api\n"
        "import dpone.runtime.stream as stream\n"
        "compile_manifest = api.compile\n"
        "def compile(*args, **kwargs):\n"
        "    sys.stderr.write(f'compiling: collector {gc.isenabled()}\\n')\n"
        "    return compile_manifest(*args, **kwargs)\n"
        "api.compile = compile\n"
        "original = stream.Stream.chunk\n"
        "def chunk(self, *args, **kwargs):\n"
        "    frozen = gc.get_freeze_count() > 0\n"
        "    sys.stderr.write(f'collector {gc.isenabled()} frozen {frozen}\\n')\n"
        "    return original(self, *args, **kwargs)\n"
        "stream.Stream.chunk = chunk\n"
        "from dpone.entry import main\n"
        f"sys.argv = ['dpone', 'run', {str(manifest)!r}, '--format', 'json']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compiling: collector False" in done.stderr
    assert "collector True frozen True" in done.stderr
    assert "collector False frozen" not in done.stderr
