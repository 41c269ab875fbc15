"""The progress bar of ``dpone run``: what it draws (rich's recording console, a clock of the
test's own), and that a real terminal gets it while a pipe gets nothing new."""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from dpone.cli.progress import ProgressBar
from dpone.runtime.report import RowCounts, RunProgress

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests_examples" / "orders_csv"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _bar() -> tuple[ProgressBar, Console, Clock]:
    console = Console(record=True, force_terminal=True, width=120, file=io.StringIO())
    clock = Clock()
    return ProgressBar(console, get_time=clock), console, clock


def _event(read: int, quarantined: int, done: int | None, total: int | None) -> RunProgress:
    counts = RowCounts(read=read, loaded=read - quarantined, quarantined=quarantined)
    return RunProgress.of(counts, bytes_read=done, bytes_total=total)


def _last_frame(console: Console) -> str:
    """The bar as last drawn (every redraw of a live display is recorded one after another)."""
    text = console.export_text()
    return text[text.rindex("━") :] if "━" in text else text


def _drawn(*steps: tuple[float, RowCounts]) -> str:
    """The last frame of a bar given each event ``seconds`` after the one before."""
    bar, console, clock = _bar()
    bar.start()
    for seconds, counts in steps:
        clock.now += seconds
        bar(counts)
    bar.stop()
    return _last_frame(console)


def test_a_file_run_shows_rows_rate_quarantined_share_and_eta() -> None:
    frame = _drawn((1, _event(10_000, 1, 25_000, 100_000)), (1, _event(20_000, 3, 50_000, 100_000)))

    assert "50%" in frame
    assert "rows 20,000" in frame
    assert "10,000 rows/s" in frame  # 20,000 rows in the 2 s since the run started
    assert "quarantined 3" in frame
    # 25,000 bytes/s over the last second, 50,000 bytes to go
    assert "ETA 0:00:02" in frame


def test_a_finished_read_shows_all_of_it_and_no_time_left() -> None:
    frame = _drawn((4, _event(40, 4, 4_096, 4_096)))

    assert "100%" in frame
    assert "rows 40" in frame
    assert "10 rows/s" in frame
    assert "quarantined 4" in frame
    assert "ETA 0:00:00" in frame


def test_a_source_of_unknown_size_pulses_without_share_or_eta() -> None:
    frame = _drawn((2, _event(500, 0, None, None)))

    assert "rows 500" in frame
    assert "250 rows/s" in frame
    assert "quarantined 0" in frame
    assert "%" not in frame
    assert "ETA" not in frame


def test_plain_counts_are_shown_too() -> None:
    frame = _drawn((1, RowCounts(read=7, quarantined=2)))

    assert "rows 7" in frame
    assert "7 rows/s" in frame
    assert "quarantined 2" in frame


def test_it_redraws_at_most_every_fifth_of_a_second() -> None:
    bar, console, clock = _bar()
    bar.start()
    for read in range(1, 11):  # ten chunks within 0.1 s: one drawing
        clock.now += 0.01
        bar(_event(read, 0, None, None))
    drawn = console.export_text(clear=False).count("rows/s")
    clock.now += 0.2
    bar(_event(11, 0, None, None))

    assert drawn == 1
    assert console.export_text(clear=False).count("rows/s") == 2
    bar.stop()


def test_nothing_is_drawn_before_the_first_chunk() -> None:
    bar, console, _ = _bar()
    bar.start()
    bar.stop()
    assert console.export_text().strip() == ""


# --- the real command -----------------------------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "orders"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".dpone*"))
    return project / "manifest.yaml"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(COLUMNS="120", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    return env


def test_a_terminal_sees_the_bar(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    main, child = pty.openpty()
    seen = bytearray()
    with subprocess.Popen(
        [sys.executable, "-m", "dpone", "run", str(manifest), "--format", "json"],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
    ) as proc:
        os.close(child)
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the process closed its end of the terminal
                break
            if not data:
                break
            seen += data
        os.close(main)
        assert proc.stdout is not None
        report = json.loads(proc.stdout.read())
        assert proc.wait(timeout=300) == 0

    screen = seen.decode("utf-8", "replace")
    assert report["rows"]["read"] == 40
    assert "━" in screen
    assert "100%" in screen
    assert "rows 40" in screen
    assert "rows/s" in screen
    # the last drawing is of the stream's end: every DLQ record durable
    assert "quarantined 4" in screen
    assert "ETA 0:00:00" in screen
    assert "run.finished" in screen  # the logs still reach the terminal


def test_a_pipe_gets_no_bar(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "dpone", "run", str(manifest), "--format", "json"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"]["quarantined"] == 4
    assert "━" not in proc.stderr
    assert "rows/s" not in proc.stderr
    # The logs are what a pipe gets: one JSON object per line.
    events = [json.loads(line)["event"] for line in proc.stderr.splitlines()]
    assert events[0] == "run.start"
    assert "run.finished" in events
