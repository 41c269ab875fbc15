"""dlt with a Pydantic model and ``discard_row`` (data_type and columns) on the first 200,000
rows of the end-to-end benchmark's CSV, read with pyarrow and fed as dicts, into a fresh DuckDB
destination. It stays in-process (this process pinned to the bench's core while it runs): its
import (seconds) is not counted, which favours dlt."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import duckdb
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from bench import e2e_data

DLT_ROWS = 200_000
DLT_BATCH = 10_000  # rows per list the resource yields (one Pydantic list validation each)
DLT_REPEATS = 3


@contextlib.contextmanager
def dlt_sandbox(base: Path, core: int) -> Iterator[None]:
    """Telemetry off; dlt's folders inside ``base``; this process on ``core``; all restored."""
    wanted = {
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "DLT_DATA_DIR": str(base / "dlt-data"),
        "DLT_PROJECT_DIR": str(base / "dlt-project"),
    }
    saved = {k: os.environ.get(k) for k in wanted}
    cores = os.sched_getaffinity(0)
    os.environ.update(wanted)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


class Order(BaseModel):
    """The careful user's model (as in ``bench_contracts``): int64 bounds, no NaN/inf."""

    model_config = ConfigDict(allow_inf_nan=False)

    id: Int64
    customer: str
    amount: Annotated[Decimal, Field(max_digits=12, decimal_places=2)]
    quantity: Int64
    updated_at: AwareDatetime
    is_gift: bool
    discount: float | None = None
    note: str


def dlt_case(base: Path, source: Path) -> Callable[[str], tuple[float, frozenset[int]]]:
    import dlt  # after dlt_sandbox set its environment

    def one(tag: str) -> tuple[float, frozenset[int]]:
        db = base / f"dlt-{tag}.duckdb"
        os.sync()
        began = time.perf_counter()
        rows = e2e_data.read_csv_as_text(source).to_pylist()

        @dlt.resource(
            name="orders",
            columns=Order,
            schema_contract={"data_type": "discard_row", "columns": "discard_row"},
        )
        def orders() -> Iterator[list[dict[str, Any]]]:
            for start in range(0, len(rows), DLT_BATCH):
                yield rows[start : start + DLT_BATCH]

        pipeline = dlt.pipeline(
            pipeline_name=f"orders_dlt_{tag}",
            pipelines_dir=str(base / "dlt-pipelines"),
            destination=dlt.destinations.duckdb(str(db)),
            dataset_name="analytics",
        )
        pipeline.run(orders())
        took = time.perf_counter() - began
        con = duckdb.connect(str(db), read_only=True)
        try:
            ids = frozenset(r[0] for r in con.execute("SELECT id FROM analytics.orders").fetchall())
        finally:
            con.close()
        shutil.rmtree(base / "dlt-pipelines", ignore_errors=True)
        db.unlink()
        return took, ids

    return one


def dlt_note(source: Path, loaded: frozenset[int]) -> str:
    """dlt's loaded rows against the exact split of the same 200,000 rows."""
    valid, _ = e2e_data.split_valid(e2e_data.read_csv_as_text(source))
    exact = frozenset(valid.column("id").to_pylist())
    if loaded == exact:
        return f"dlt loaded {len(loaded):,} of {DLT_ROWS:,} rows: the exact split"
    wrong: dict[str, int] = {}
    for row_id in loaded - exact:
        cell = (
            e2e_data.bad_cell(row_id - e2e_data.FIRST_ID) if row_id >= e2e_data.FIRST_ID else None
        )
        column = cell[0] if cell is not None else "id"
        wrong[column] = wrong.get(column, 0) + 1
    loaded_bad = ", ".join(f"{c} {n:,}" for c, n in sorted(wrong.items())) or "none"
    return (
        f"dlt loaded {len(loaded):,} of {DLT_ROWS:,} rows, NOT the exact split "
        f"({len(exact):,}): bad rows it loaded, by bad column: {loaded_bad}; good rows it "
        f"dropped: {len(exact - loaded):,}"
    )
