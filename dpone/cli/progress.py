"""The progress of ``dpone run`` at a terminal: one rich progress bar on stderr.

After every chunk it shows the rows read, rows per second and the rows quarantined. When the
source knows its size (file sources: ``connectors/progress.py``) the bar fills with the bytes
read and an ETA follows, from the bytes-per-second rate of the last 30 seconds; otherwise the
bar pulses and there is no ETA. It is redrawn from the run's own thread, at most every 0.2 s,
so no refresh thread reads anything of the run. Not at a terminal (a pipe, a CI log) nothing
is shown: the report and the logs are the output, as they always were.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
)
from rich.text import Text

from dpone.runtime.report import RowCounts

REDRAW_S = 0.2


class _RowRate(ProgressColumn):
    """Rows read per second since the run started."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.fields["rows"] / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} rows/s")


class _Eta(ProgressColumn):
    """The time left, from the bytes still to read at the recent bytes-per-second rate."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        remaining = task.time_remaining
        if remaining is None:
            return Text("ETA -:--:--")
        return Text(f"ETA {timedelta(seconds=int(remaining))}")


class ProgressBar:
    """A run's progress callback (``dpone.run(on_progress=...)``) drawing one bar.

    :meth:`start` before the run (the bar appears with the first chunk), :meth:`stop` after
    it: the last state of the bar stays on the screen. ``get_time`` is the clock of the
    rates and the ETA (tests pass their own).
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        get_time: Callable[[], float] = time.monotonic,
    ) -> None:
        self._get_time = get_time
        self._progress = Progress(
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("rows {task.fields[rows]:,}"),
            _RowRate(),
            TextColumn("quarantined {task.fields[quarantined]:,}"),
            _Eta(),
            console=console or Console(stderr=True),
            auto_refresh=False,
            get_time=get_time,
            redirect_stdout=False,
        )
        self._task: TaskID | None = None
        self._drawn = 0.0

    @classmethod
    def on(cls, stream: IO[str]) -> ProgressBar:
        """A bar drawn on ``stream`` (the CLI's: stderr, when it is a terminal)."""
        return cls(Console(file=stream))

    def start(self) -> None:
        self._progress.start()
        # Hidden until the first chunk; its clock (the rows/s) starts with the run.
        self._task = self._progress.add_task(
            "run", total=None, visible=False, rows=0, quarantined=0
        )

    def __call__(self, counts: RowCounts) -> None:
        if self._task is None:
            return
        bytes_read = getattr(counts, "bytes_read", None)
        bytes_total = getattr(counts, "bytes_total", None)
        self._progress.update(
            self._task,
            visible=True,
            total=bytes_total if bytes_total else None,
            completed=bytes_read or 0,
            rows=counts.read,
            quarantined=counts.quarantined,
        )
        now = self._get_time()
        if now - self._drawn >= REDRAW_S:
            self._drawn = now
            self._progress.refresh()

    def stop(self) -> None:
        """Draw the last state and leave it on the screen."""
        if self._task is not None:
            self._progress.refresh()
            self._progress.stop()
            self._task = None


__all__ = ["ProgressBar"]
