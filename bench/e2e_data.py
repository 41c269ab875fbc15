"""The end-to-end benchmark's data: an orders export CSV with 1% bad rows, its manifest, and the
careful hand-written pyarrow.compute kernel that splits it into valid and invalid rows.

Every bad row has exactly one bad value, spread over the columns, and each bad spelling is bad
under every reading (quarantine's lenient repairs included): a value that a lenient parser
could repair (" 42", "12.340", "yes") is never generated, so the hand-written kernel and
dpone's contract must agree row for row. The good values are in canonical text form.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

COLUMNS = ("id", "customer", "amount", "quantity", "updated_at", "is_gift", "discount", "note")
BAD_EVERY = 100  # one row in a hundred: 1%
BAD_OFFSET = 37

# Per column, the bad spellings used in turn ("" is an empty field: NULL in a NOT NULL column).
BAD_VALUES: dict[str, tuple[str, ...]] = {
    "id": ("", "A1001"),
    "customer": ("",),
    "amount": ("12.345", '"1,234.50"', ""),
    "quantity": ("3.5", "two", ""),
    "updated_at": ("2026-03-01 10:00:00", "03/01/2026 10:00", ""),
    "is_gift": ("maybe", ""),
    "discount": ("n/a", "NaN"),
}
_BAD_COLUMNS = tuple(BAD_VALUES)

_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson")
_OFFSETS = ("Z", "+02:00", "-05:00", "+05:30", "+00:00", "-08:00")
_NOTES = ("", "", "", "leave at the door", '"gift wrap, please"', "call first", "")


def write_orders_csv(path: Path, rows: int, *, seed: int = 20260301) -> int:
    """Write ``rows`` orders to ``path``; returns the number of bad rows written."""
    rnd = random.Random(seed)
    customers = [f"{f} {last}" for f in _FIRST for last in _LAST]
    bad = 0
    lines = [",".join(COLUMNS) + "\n"]
    for i in range(rows):
        cents = rnd.randrange(100, 5_000_000)
        minute = i // 7
        day, rest = divmod(minute, 24 * 60)
        fraction = f".{rnd.randrange(10**6):06d}" if i % 3 == 0 else ""
        values = [
            str(1_000_000 + i),
            customers[rnd.randrange(len(customers))],
            f"{cents // 100}.{cents % 100:02d}",
            str(rnd.randrange(1, 21)),
            f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{rest // 60:02d}:{rest % 60:02d}:"
            f"{i % 60:02d}{fraction}"
            f"{_OFFSETS[i % len(_OFFSETS)]}",
            "true" if rnd.random() < 0.1 else "false",
            "" if rnd.random() < 0.3 else f"{rnd.randrange(0, 5000) / 100}",
            _NOTES[i % len(_NOTES)],
        ]
        if i % BAD_EVERY == BAD_OFFSET:
            k = i // BAD_EVERY
            column = _BAD_COLUMNS[k % len(_BAD_COLUMNS)]
            spellings = BAD_VALUES[column]
            values[COLUMNS.index(column)] = spellings[(k // len(_BAD_COLUMNS)) % len(spellings)]
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
        note: {{type: string, nullable: true}}
    dlq: {{retention_days: 30, pii_policy: reference_only}}
    runtime_evidence: {{output_dir: {work_dir}/evidence}}
state: {{type: file}}
"""


def write_manifest(
    path: Path, *, csv: str, work_dir: str, chunk_size: int, name: str = "orders_e2e"
) -> Path:
    path.write_text(
        MANIFEST.format(name=name, csv=csv, work_dir=work_dir, chunk_size=chunk_size),
        encoding="utf-8",
    )
    return path


# --- the hand-written script's pieces ---------------------------------------------------------

_INT = r"^-?(?:0|[1-9][0-9]{0,17})$"  # 18 digits at most: always inside int64
_DECIMAL_12_2 = r"^-?(?:0|[1-9][0-9]{0,9})(?:\.[0-9]{1,2})?$"
_TIMESTAMP_TZ = (
    r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
_FLOAT = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,2})?$"
_BOOLS = pa.array(["false", "true"])
OUTPUT_TYPES = {
    "id": pa.int64(),
    "customer": pa.string(),
    "amount": pa.decimal128(12, 2),
    "quantity": pa.int64(),
    "updated_at": pa.timestamp("us", tz="UTC"),
    "is_gift": pa.bool_(),
    "discount": pa.float64(),
    "note": pa.string(),
}


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


def _matches(column: pa.ChunkedArray, pattern: str) -> pa.ChunkedArray:
    # NULL never matches: the NOT NULL columns reject it, the nullable one ORs it back in.
    return pc.fill_null(pc.match_substring_regex(column, pattern), False)


def split_valid(table: pa.Table) -> tuple[pa.Table, int]:
    """(valid rows cast to their types, invalid row count): validate every column with the
    strict grammar of its type, AND the masks, then cast only the rows that passed (a cast that
    cannot raise). The one-pass, no-bookkeeping kernel a careful engineer writes by hand."""
    ok = [
        _matches(table["id"], _INT),
        pc.is_valid(table["customer"]),
        _matches(table["amount"], _DECIMAL_12_2),
        _matches(table["quantity"], _INT),
        _matches(table["updated_at"], _TIMESTAMP_TZ),
        pc.fill_null(pc.is_in(table["is_gift"], value_set=_BOOLS), False),
        pc.or_(pc.is_null(table["discount"]), _matches(table["discount"], _FLOAT)),
    ]
    mask = ok[0]
    for m in ok[1:]:
        mask = pc.and_(mask, m)
    valid = table.filter(mask)
    columns = []
    for name in COLUMNS:
        col = valid[name]
        if name == "is_gift":
            columns.append(pc.equal(col, "true"))
        else:
            columns.append(col.cast(OUTPUT_TYPES[name]))
    fields = [pa.field(n, OUTPUT_TYPES[n], nullable=n in ("discount", "note")) for n in COLUMNS]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields)), table.num_rows - len(valid)
