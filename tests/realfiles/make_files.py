"""Writes the CSV files of ``data/`` that other tools than R write (the R ones: make_files.R).

Run from this folder with the project's virtualenv: ``python make_files.py``; the output is
committed, so the tests need neither polars nor this script.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import polars as pl

OUT = Path("data")

# polars' writer: lower-case booleans, ISO date-times with a T and fractional seconds, empty
# fields for nulls.
pl.DataFrame(
    {
        "order id": [1, 2, 3, 4],
        "paid": [True, False, None, True],
        "placed_at": [
            dt.datetime(2024, 5, 1, 8, 30, 15, 250000),
            None,
            dt.datetime(2024, 5, 2, 23, 59, 59),
            dt.datetime(2024, 5, 3),
        ],
        "amount": [12.5, None, 0.1, 1e-7],
        "city": ["São Paulo", "", None, "Köln"],
    }
).write_csv(OUT / "polars_orders.csv")

# Python's csv module as Excel's "CSV UTF-8" writes it: a byte-order mark, CRLF line ends,
# quotes only where needed.
with open(OUT / "excel_utf8.csv", "w", encoding="utf-8-sig", newline="") as fh:
    writer = csv.writer(fh)
    writer.writerow(["Name", "Qty", "Unit price", "Note"])
    writer.writerow(["Widget", "3", "2.50", "ok"])
    writer.writerow(["Gadget, large", "10", "12.00", 'says "new"'])
    writer.writerow(["Gizmo", "", "7.25", "two\r\nlines"])
    writer.writerow(["Ünïcödé", "1", "0.99", ""])
