"""The end-to-end benchmark's data: an orders export CSV with 1% bad rows, its manifest, and the
hand-written script's reading and splitting (the kernel is ``bench_contracts``'s).

Reused from ``bench/bench_contracts.py``: its bad-value pools (``BAD``: garbage, thousands
separators, scale/precision and int64 overflow, Feb 30, 24:00, naive timestamps, NaN/inf...)
and its careful hand-written pyarrow.compute kernel, which splits valid/invalid exactly. Not
its ``generate()``: that one makes 1% bad values *per typed column* (about 6% bad rows) and
relies on empty strings that an unquoted CSV turns into NULL; this case wants 1% bad rows in
a plain CSV. Every bad row here has exactly one bad value, the columns taking turns; the good
values are canonical, so the kernel and dpone's contract (quarantine) must agree row for row.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from bench.bench_contracts import BAD, _kernel

COLUMNS = ("id", "customer", "amount", "quantity", "updated_at", "is_gift", "discount", "note")
#: This CSV's names -> the names ``bench_contracts``' kernel and bad-value pools use.
KERNEL_NAMES = {
    "id": "id",
    "customer": "name",
    "amount": "amount",
    "quantity": "qty",
    "updated_at": "ts",
    "is_gift": "flag",
    "discount": "score",
    "note": "note",
}
FIRST_ID = 1_000_000  # data row i has id FIRST_ID + i (unless the id is its bad value)
BAD_EVERY = 100  # one row in a hundred: 1%
BAD_OFFSET = 37
#: Per column, the bad spellings used in turn ("" is an empty field: NULL in a NOT NULL column).
BAD_VALUES: dict[str, tuple[str, ...]] = {
    column: tuple(BAD[KERNEL_NAMES[column]]) for column in COLUMNS if KERNEL_NAMES[column] in BAD
}
_BAD_COLUMNS = tuple(BAD_VALUES)

_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson")
_OFFSETS = ("Z", "+02:00", "-05:00", "+05:30", "+00:00", "-08:00")
_NOTES = ("-", "leave at the door", "gift wrap, please", "call first", 'ring "twice"', "web")


def _field(value: str) -> str:
    if "," in value or '"' in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def bad_cell(i: int) -> tuple[str, str] | None:
    """(column, bad spelling) of data row ``i`` (0-based), or None for a good row."""
    if i % BAD_EVERY != BAD_OFFSET:
        return None
    k = i // BAD_EVERY
    column = _BAD_COLUMNS[k % len(_BAD_COLUMNS)]
    spellings = BAD_VALUES[column]
    return column, spellings[(k // len(_BAD_COLUMNS)) % len(spellings)]


def write_orders_csv(path: Path, rows: int, *, seed: int = 20260301) -> int:
    """Write ``rows`` orders to ``path``; returns the number of bad rows written."""
    rnd = random.Random(seed)
    customers = [f"{f} {last}" for f in _FIRST for last in _LAST]
    notes = [_field(n) for n in _NOTES]
    bad = 0
    lines = [",".join(COLUMNS) + "\n"]
    for i in range(rows):
        cents = rnd.randrange(100, 5_000_000)
        minute = i // 7
        day, rest = divmod(minute, 24 * 60)
        fraction = f".{rnd.randrange(10**6):06d}" if i % 3 == 0 else ""
        values = [
            str(FIRST_ID + i),
            customers[rnd.randrange(len(customers))],
            f"{cents // 100}.{cents % 100:02d}",
            str(rnd.randrange(1, 21)),
            f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{rest // 60:02d}:{rest % 60:02d}:"
            f"{i % 60:02d}{fraction}"
            f"{_OFFSETS[i % len(_OFFSETS)]}",
            "true" if rnd.random() < 0.1 else "false",
            "" if rnd.random() < 0.3 else f"{rnd.randrange(0, 5000) / 100}",
            notes[i % len(notes)],
        ]
        cell = bad_cell(i)
        if cell is not None:
            column, spelling = cell
            values[COLUMNS.index(column)] = _field(spelling)
            bad += 1
        lines.append(",".join(values) + "\n")
        if len(lines) >= 50_000:
            _append(path, lines)
            lines = []
    _append(path, lines)
    return bad


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.writelines(lines)


def copy_head(src: Path, dst: Path, rows: int) -> None:
    """The header and the first ``rows`` data rows of ``src`` (no quoted newlines in it)."""
    with src.open(encoding="utf-8", newline="") as inp, dst.open("w", encoding="utf-8") as out:
        for n, line in enumerate(inp):
            if n > rows:
                break
            out.write(line)


MANIFEST = """\
kind: dpone.manifest.v1
name: {name}
description: End-to-end benchmark of an orders export into DuckDB.
runtime:
  work_dir: {work_dir}
  chunk_size: {chunk_size}
source:
  type: file
  format: csv
  path: {csv}
  options:
    csv: {{delimiter: ",", header: true, encoding: utf-8, null_values: [""]}}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  strategy: {{mode: append}}
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer, nullable: false}}
        customer: {{type: string, nullable: false}}
        amount: {{type: decimal, precision: 12, scale: 2, nullable: false}}
        quantity: {{type: integer, nullable: false}}
        updated_at: {{type: timestamp, timezone: true, nullable: false}}
        is_gift: {{type: boolean, nullable: false}}
        discount: {{type: float, nullable: true}}
        note: {{type: string, nullable: false}}
    dlq: {{retention_days: 30, pii_policy: reference_only}}
    runtime_evidence: {{output_dir: {work_dir}/evidence}}
state: {{type: file}}
"""


def write_manifest(
    path: Path,
    *,
    csv: str,
    work_dir: str,
    chunk_size: int,
    name: str = "orders_e2e",
    dlq_dir: str | None = None,
) -> Path:
    """The benchmark's manifest; ``dlq_dir`` moves the DLQ out of ``work_dir``."""
    text = MANIFEST.format(name=name, csv=csv, work_dir=work_dir, chunk_size=chunk_size)
    if dlq_dir is not None:
        text = text.replace("dlq: {", f"dlq: {{directory: {json.dumps(dlq_dir)}, ", 1)
    path.write_text(text, encoding="utf-8")
    return path


# --- the hand-written script's pieces ---------------------------------------------------------


def read_csv_as_text(path: Path) -> pa.Table:
    """The whole file, every column as string, an empty unquoted field as NULL."""
    return pacsv.read_csv(
        str(path),
        convert_options=pacsv.ConvertOptions(
            column_types={name: pa.string() for name in COLUMNS},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def split_valid(table: pa.Table) -> tuple[pa.Table, int]:
    """(valid rows cast to their types, invalid row count), by ``bench_contracts``' kernel,
    one record batch at a time (the kernel's unit), under its column names (a rename is free)."""
    split = _kernel()
    names = [KERNEL_NAMES[n] for n in table.column_names]
    parts = [split(batch)[0] for batch in table.rename_columns(names).to_batches()]
    valid = pa.Table.from_batches(parts).rename_columns(table.column_names)
    return valid, table.num_rows - valid.num_rows
