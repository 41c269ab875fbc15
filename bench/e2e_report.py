"""The end-to-end benchmark's figures: a table of every case, the ratios against their targets,
dpone's stages from its log lines, and what each program loaded against the exact split."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from bench.e2e_dlt import DLT_ROWS

if TYPE_CHECKING:
    from bench.bench_e2e import Outcome

#: dpone's stages, from the timestamps of its log events: (label, event that ends the stage).
STAGES = (
    ("start: interpreter, imports, compile, preflight, lock", "run.start"),
    ("stream: read, enforce, stage, DLQ", "dlq.run.closed"),
    ("evidence built, sink commit, published", "evidence.written"),
    ("state, journal", "run.finished"),
    ("exit", None),
)
DPONE_1, DPONE_2 = "dpone, 1 core", "dpone, 2 cores"
SCRIPT, CTAS, SQL = (
    "(a) script, 1 core",
    "(b) DuckDB CTAS, 2 cores",
    "(b) DuckDB SQL contract, 2 cores",
)
SMALL, IMPORTS = "dpone 2 rows, 1 core", "(e) imports, 1 core"
BIG = "dpone, big CSV, 2 cores"
#: (label, numerator case, denominator case, target): wall-time ratios, above 1 = dpone faster.
RATIOS = (
    ("(a) dpone / hand-written script, 1 core", SCRIPT, DPONE_1, 1.1),
    ("(b) dpone / DuckDB CTAS (no checks), 2 cores", CTAS, DPONE_2, 1.0),
    ("(b) dpone / DuckDB SQL contract, 2 cores", SQL, DPONE_2, 1.2),
    ("(c) dpone 2 cores / dpone 1 core", DPONE_1, DPONE_2, 1.5),
)
STARTUP_TARGET = 0.25  # s above the imports
RSS_TARGET_MB = 1024
DLT_TARGET = 25.0


@dataclass
class Report:
    rows: int
    bad: int
    repeats: int
    load: tuple[float, ...]
    big_rows: int
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    dlt: list[float] = field(default_factory=list)
    dlt_note: str = ""

    @property
    def load_before(self) -> str:
        return ", ".join(f"{n:.1f}" for n in self.load)

    def add(self, label: str, outcome: Outcome) -> None:
        self.outcomes.setdefault(label, []).append(outcome)

    def wall(self, label: str) -> float:
        return statistics.median(o.seconds for o in self.outcomes[label])

    def cpu(self, label: str) -> float:
        return statistics.median(o.cpu for o in self.outcomes[label])

    @staticmethod
    def stages(log: str, spawned: float, wall: float) -> dict[str, float]:
        """Seconds per stage of :data:`STAGES`, from the log lines' UTC timestamps."""
        seen: dict[str, float] = {}
        for line in log.splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                event = json.loads(line)
                stamp = datetime.fromisoformat(event["timestamp"]).timestamp()
                seen.setdefault(event["event"], stamp)
        marks = [spawned]
        for _, ends in STAGES:
            if ends is not None and ends not in seen:
                return {}
            marks.append(seen[ends] if ends is not None else spawned + wall)
        pairs = zip(STAGES, marks[:-1], marks[1:], strict=True)
        return {label: b - a for (label, _), a, b in pairs}

    def print(self) -> None:
        print(
            f"  {'case':<36}{'wall s':>8}{'spread':>12}{'rows/s':>11}{'cpu s':>7}{'spread':>11}"
            f"{'RSS MB':>8}"
        )
        for label, outcomes in self.outcomes.items():
            walls = sorted(o.seconds for o in outcomes)
            cpus = sorted(o.cpu for o in outcomes)
            rows = self.big_rows if label == BIG else 2 if label == SMALL else self.rows
            rate = f"{rows / self.wall(label):>11,.0f}" if label != IMPORTS else f"{'':>11}"
            print(
                f"  {label:<36}{self.wall(label):>8.2f}{walls[0]:>6.2f}-{walls[-1]:<5.2f}{rate}"
                f"{self.cpu(label):>7.2f}{cpus[0]:>5.2f}-{cpus[-1]:<5.2f}"
                f"{statistics.median(o.rss_mb for o in outcomes):>8,.0f}"
            )
        self._ratios()
        self._stages()
        for problem in self._mismatches():
            print(f"  {problem}")
        print(f"  {self.dlt_note}")
        after = ", ".join(f"{n:.1f}" for n in os.getloadavg())
        print(f"  load average before {self.load_before}, after {after}")

    def _ratios(self) -> None:
        for label, slow, fast, target in RATIOS:
            if slow in self.outcomes and fast in self.outcomes:
                ratio = self.wall(slow) / self.wall(fast)
                by_cpu = self.cpu(slow) / self.cpu(fast)
                print(
                    f"  {label}: {ratio:.2f}x (by CPU time {by_cpu:.2f}x): "
                    f"{_verdict(ratio >= target)} the >= {target}x target"
                )
        print("  (d) engine: dask against engine: local: `python -m bench dask`")
        above = self.wall(SMALL) - self.wall(IMPORTS)
        cpu_above = self.cpu(SMALL) - self.cpu(IMPORTS)
        print(
            f"  (e) a 2-row run is {above:.2f} s above `import pyarrow, duckdb` (CPU "
            f"{cpu_above:.2f} s): {_verdict(above <= STARTUP_TARGET)} the <= "
            f"{STARTUP_TARGET} s target"
        )
        if BIG in self.outcomes:
            rss = self.outcomes[BIG][0].rss_mb
            print(
                f"  {self.big_rows:,} rows on 2 cores: peak RSS {rss:,.0f} MB: "
                f"{_verdict(0 < rss < RSS_TARGET_MB)} the < {RSS_TARGET_MB} MB target"
            )
        if self.dlt:
            dlt_rate = DLT_ROWS / statistics.median(self.dlt)
            vs = self.rows / self.wall(DPONE_1) / dlt_rate
            print(
                f"  dpone (1 core) / dlt + Pydantic discard_row ({DLT_ROWS:,} rows in-process, "
                f"median {statistics.median(self.dlt):.2f} s): {vs:.0f}x: "
                f"{_verdict(vs >= DLT_TARGET)} the >= {DLT_TARGET:.0f}x target"
            )

    def _stages(self) -> None:
        split = [o.stages for o in self.outcomes.get(DPONE_1, []) if o.stages]
        if split:
            parts = ", ".join(
                f"{label} {statistics.median(s[label] for s in split):.2f}" for label, _ in STAGES
            )
            print(f"  dpone's stages on 1 core, median s (from its log timestamps): {parts}")

    def _mismatches(self) -> list[str]:
        problems = []
        exact = (self.rows - self.bad, self.bad)
        for label in (DPONE_1, DPONE_2, SCRIPT):
            for o in self.outcomes.get(label, []):
                if (o.loaded, o.rejected) != exact:
                    problems.append(f"MISMATCH: {label} split {o.loaded:,} / {o.rejected:,}")
        checksums = {
            o.checksum for label in (DPONE_1, DPONE_2, SCRIPT) for o in self.outcomes.get(label, [])
        }
        if len(checksums) != 1:
            problems.append(f"MISMATCH: the loaded tables differ: {sorted(map(str, checksums))}")
        if not problems:
            print(
                f"  correctness: dpone (1 and 2 cores) and (a) agree on every run: {exact[0]:,} "
                f"loaded, {exact[1]:,} rejected (dpone: as many DLQ segment lines, evidence "
                "and state present), identical table checksums"
            )
        for label, want, what in (
            (CTAS, (self.rows, 0), "loads every row, as text where a column has a bad value"),
            (SQL, exact, "splits exactly as the contract"),
        ):
            got = {(o.loaded, o.rejected) for o in self.outcomes.get(label, [])}
            if got and got != {want}:
                problems.append(f"{label}: split {sorted(got)}, not {want}: it NOT {what}")
            elif got:
                print(f"  {label} {what}")
        if BIG in self.outcomes:
            big = self.outcomes[BIG][0]
            if big.rejected != self.big_rows // 100:
                problems.append(f"MISMATCH: {BIG} rejected {big.rejected:,}")
        return problems


def _verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"
