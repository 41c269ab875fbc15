"""The programs the end-to-end benchmark compares dpone with, each a .py file of its own that
the bench writes to its folder and times as a whole process (interpreter start and imports
included), exactly as it times ``dpone run``."""

from __future__ import annotations

#: (a) The hand-written script, as a careful engineer would write it: pyarrow CSV (every column
#: as text) -> the exact kernel of ``bench_contracts`` -> the valid rows into DuckDB in one
#: transaction. No DLQ, no evidence, no state, no streaming.
SCRIPT = '''\
"""pyarrow CSV (all text) -> the exact kernel -> the valid rows into DuckDB, one transaction."""
import sys

sys.path.insert(0, sys.argv[3])  # the repository, for bench.e2e_data (pyarrow and stdlib only)

import duckdb
from bench.e2e_data import read_csv_as_text, split_valid

valid, invalid = split_valid(read_csv_as_text(sys.argv[1]))
con = duckdb.connect(sys.argv[2])
con.execute("BEGIN TRANSACTION")
con.execute("CREATE SCHEMA analytics")
con.register("valid_rows", valid)
con.execute("CREATE TABLE analytics.orders AS SELECT * FROM valid_rows")
con.execute("COMMIT")
con.close()
print(valid.num_rows, invalid)
'''

#: (b1) DuckDB loading the file with no check at all: what a plain load costs.
CTAS = '''\
"""DuckDB: CREATE TABLE AS SELECT * FROM read_csv, no checks (its own threads, every core)."""
import sys

import duckdb

con = duckdb.connect(sys.argv[2])
con.execute("BEGIN TRANSACTION")
con.execute("CREATE SCHEMA analytics")
con.execute(
    "CREATE TABLE analytics.orders AS SELECT * FROM read_csv(?, header = true)", [sys.argv[1]]
)
con.execute("COMMIT")
print(con.execute("SELECT count(*) FROM analytics.orders").fetchone()[0], 0)
con.close()
'''

#: (b2) DuckDB SQL doing the contract: every column as text, TRY_CAST and the checks TRY_CAST
#: does not make (a decimal's scale, a timestamp's offset, the hour 24, booleans, NaN and
#: infinity), the valid rows typed into one table and the rejects into another, one
#: transaction. No record of why a row was rejected, no DLQ, evidence or state.
SQL_CONTRACT = '''\
"""DuckDB SQL doing the contract: read_csv all_varchar -> TRY_CAST + checks -> valid/reject."""
import sys

import duckdb

INT = "regexp_full_match({c}, '-?[0-9]{{1,19}}') AND TRY_CAST({c} AS BIGINT) IS NOT NULL"
CHECKS = " AND ".join([
    INT.format(c="id"),
    "customer IS NOT NULL",
    "regexp_full_match(amount, '-?[0-9]{1,10}([.][0-9]{1,2})?')",
    INT.format(c="quantity"),
    "regexp_full_match(updated_at, '.*T([01][0-9]|2[0-3]):.*(Z|[+-]"
    "([01][0-9]|2[0-3]):[0-5][0-9])')",
    "TRY_CAST(updated_at AS TIMESTAMPTZ) IS NOT NULL",
    "is_gift IN ('true', 'false')",
    "(discount IS NULL OR isfinite(TRY_CAST(discount AS DOUBLE)))",
    "note IS NOT NULL",
])
TYPED = (
    "CAST(id AS BIGINT) AS id, customer, CAST(amount AS DECIMAL(12, 2)) AS amount, "
    "CAST(quantity AS BIGINT) AS quantity, CAST(updated_at AS TIMESTAMPTZ) AS updated_at, "
    "CAST(is_gift AS BOOLEAN) AS is_gift, CAST(discount AS DOUBLE) AS discount, note"
)
con = duckdb.connect(sys.argv[2])
con.execute("SET TimeZone = 'UTC'")
con.execute("BEGIN TRANSACTION")
con.execute("CREATE SCHEMA analytics")
con.execute(
    f"CREATE TEMP TABLE checked AS SELECT *, coalesce({CHECKS}, false) AS ok "
    "FROM read_csv(?, header = true, all_varchar = true)",
    [sys.argv[1]],
)
con.execute(f"CREATE TABLE analytics.orders AS SELECT {TYPED} FROM checked WHERE ok")
con.execute("CREATE TABLE analytics.rejects AS SELECT * EXCLUDE (ok) FROM checked WHERE NOT ok")
con.execute("COMMIT")
counts = con.execute(
    "SELECT (SELECT count(*) FROM analytics.orders), (SELECT count(*) FROM analytics.rejects)"
).fetchone()
print(*counts)
con.close()
'''

#: (e)'s floor: the interpreter and the two libraries every program here imports.
IMPORTS = "import pyarrow, duckdb\n"

PROGRAMS = {
    "handwritten.py": SCRIPT,
    "duckdb_ctas.py": CTAS,
    "duckdb_contract.py": SQL_CONTRACT,
    "imports.py": IMPORTS,
}
