"""The cost of the four built-in assertions on 1,000,000 rows, relative to enforcement alone,
and the memory of ``unique_columns`` on 1,000,000 distinct keys against its stated bound.

Same data and contract as ``bench_contracts`` (8 string columns, 1% bad values).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.bench_contracts import contract, generate
from dpone.assertions.builtins import UniqueColumns
from dpone.assertions.engine import AssertionEngine
from dpone.assertions.spec import AssertionSpec
from dpone.contracts.enforcer import ContractEnforcementService

ROWS = 1_000_000
CHUNK = 100_000
REPEAT = 3
#: What ``UniqueColumns``' docstring states: about 100 bytes per distinct key.
STATED_BYTES_PER_KEY = 100

BUILTINS = (
    ("min_rows_per_load", {"value": 1}),
    ("max_rows_per_load", {"value": 10_000_000}),
    ("required_columns", {"value": ["id", "name"]}),
    ("unique_columns", {"value": ["id"]}),
)


def _specs(names: tuple[str, ...]) -> list[AssertionSpec]:
    return [
        AssertionSpec(
            type=n,
            params=p,
            on_failure="quarantine" if n == "unique_columns" else "warn",
            pointer=f"/quality/assertions/{n}",
            name=n,
        )
        for n, p in BUILTINS
        if n in names
    ]


def _run(batches: list[pa.RecordBatch], names: tuple[str, ...]) -> float:
    enforcer = ContractEnforcementService(contract())
    engine = AssertionEngine(_specs(names), Path.cwd()) if names else None
    started = time.perf_counter()
    for batch in batches:
        result = enforcer.enforce(batch)
        if engine is not None:
            engine.observe(result.valid)
    if engine is not None:
        engine.finalize()
    return time.perf_counter() - started


def _median(batches: list[pa.RecordBatch], names: tuple[str, ...]) -> float:
    return statistics.median(_run(batches, names) for _ in range(REPEAT))


def _unique_memory(n: int) -> tuple[int, float]:
    keys = pa.record_batch({"id": pa.array(range(n), pa.int64())})
    gc.collect()
    tracemalloc.start()
    check = UniqueColumns({"value": ["id"]})
    for start in range(0, n, CHUNK):
        check.observe(keys.slice(start, CHUNK))
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current, current / n


def run() -> None:
    table: Any = generate(ROWS)
    batches = table.to_batches(max_chunksize=CHUNK)
    base = _median(batches, ())
    print(f"{ROWS:,} rows, chunks of {CHUNK:,}, median of {REPEAT}")
    print(f"  {'case':<34} {'seconds':>8} {'rows/s':>12} {'x enforcement alone':>20}")
    print(f"  {'enforcement alone':<34} {base:8.3f} {ROWS / base:12,.0f} {1.0:20.2f}")
    cases: list[tuple[str, tuple[str, ...]]] = [(n, (n,)) for n, _ in BUILTINS]
    cases.append(("all four built-ins", tuple(n for n, _ in BUILTINS)))
    for label, names in cases:
        seconds = _median(batches, names)
        print(f"  {'+ ' + label:<34} {seconds:8.3f} {ROWS / seconds:12,.0f} {seconds / base:20.2f}")
    held, per_key = _unique_memory(ROWS)
    verdict = "within" if per_key <= STATED_BYTES_PER_KEY else "OVER"
    print(
        f"  unique_columns on {ROWS:,} distinct keys holds {held / 2**20:.1f} MiB "
        f"({per_key:.0f} bytes/key; stated {STATED_BYTES_PER_KEY}): {verdict} the stated bound"
    )
