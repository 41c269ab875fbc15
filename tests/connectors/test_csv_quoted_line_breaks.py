"""Quoted line breaks in CSV, with default settings, through ``dpone run`` into real sinks.

A value in quotes may hold line breaks (RFC 4180, as R, Excel and pandas write them); a
quote that never closes costs only the line it opened on, whether it runs to the end of the
file or past ``max_row_bytes``; rows read count records, not lines.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.connectors.sources.file import FileSource
from dpone.dlq.store import DlqStore
from dpone.manifest.specs import FileSourceSpec
from tests.support.postgres import pg_query

from .specs import source_spec

CONTRACT = {"id": {"type": "integer", "nullable": False}, "note": {"type": "string"}}


def r_style(rows: list[tuple[int, str]], newline: str = "\n") -> bytes:
    """A file as R's ``write.csv`` writes it: every text value quoted, quotes doubled."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC, lineterminator=newline)
    writer.writerow(["id", "note"])
    writer.writerows(rows)
    return out.getvalue().encode()


def run(
    tmp: Path,
    data: bytes,
    *,
    sink: dict[str, Any] | None = None,
    csv_options: dict[str, Any] | None = None,
    chunk_size: int = 1000,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[int, Any]]:
    """One ``dpone run`` of ``data`` as the only file; the report and the quarantined lines
    (physical line -> the preserved line text)."""
    (tmp / "data").mkdir(parents=True, exist_ok=True)
    (tmp / "data" / "x.csv").write_bytes(data)
    source: dict[str, Any] = {"type": "file", "format": "csv", "path": "data/x.csv"}
    if csv_options:
        source["options"] = {"csv": csv_options}
    doc = {
        "name": "quoted",
        "runtime": {"chunk_size": chunk_size},
        "source": source,
        "sink": {
            **(sink or {"type": "duckdb", "database": str(tmp / "w.duckdb")}),
            "table": "notes",
            "options": {
                "schema_contract": {"enforcement": "quarantine", "columns": CONTRACT},
                "dlq": {"pii_policy": "preserve"},
            },
        },
    }
    manifest = tmp / "manifest.yaml"
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["run", str(manifest), "--format", "json"], env=env or {}, catch_exceptions=False
    )
    assert result.exit_code == 0, (result.stdout[-2000:], result.stderr[-2000:])
    report = json.loads(result.stdout)
    run_id = report["dlq"]["run_id"]  # None when nothing was dead-lettered
    records = DlqStore(tmp / ".dpone" / "dlq").iter_records(run_id) if run_id else ()
    lines = {}
    for record in records:
        assert record.reason.code == "source.decode_failed"
        lines[int(record.diagnostics.source_offset or 0)] = record.payload.value["line"]
    return report, lines


def loaded(tmp: Path) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(tmp / "w.duckdb"), read_only=True) as con:
        return con.sql("SELECT id, note FROM dpone.notes ORDER BY id").fetchall()


ROWS = [
    (1, "plain"),
    (2, "two\nlines"),
    (3, 'a "quoted" word, and a comma'),
    (4, "three\nline\nvalue"),
    (5, ""),
    (6, "ends with a break\n"),
    (7, "crlf\r\ninside"),
]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_an_r_style_file_with_quoted_line_breaks_loads_exactly(
    tmp_path: Path, newline: str
) -> None:
    report, bad = run(tmp_path, r_style(ROWS, newline))
    assert bad == {}
    assert report["rows"]["read"] == len(ROWS)  # records, not the file's 12 lines
    assert report["rows"]["loaded"] == len(ROWS)
    assert loaded(tmp_path) == ROWS


GOOD_AFTER = "".join(f"{i},after {i}\n" for i in range(10, 15))


def test_an_unterminated_quote_in_the_middle_costs_only_its_line(tmp_path: Path) -> None:
    data = b'id,note\n1,"two\nlines"\n2,"never closed\n' + GOOD_AFTER.encode()
    report, bad = run(tmp_path, data)
    assert bad == {4: '2,"never closed'}
    assert loaded(tmp_path) == [(1, "two\nlines")] + [(i, f"after {i}") for i in range(10, 15)]
    assert report["rows"]["read"] == 7  # six rows and the bad line
    assert report["rows"]["quarantined"] == 1


def test_an_unterminated_quote_on_the_last_line(tmp_path: Path) -> None:
    data = b'id,note\n1,a\n2,"b\nc"\n3,"open'  # no final line break either
    report, bad = run(tmp_path, data)
    assert bad == {5: '3,"open'}
    assert loaded(tmp_path) == [(1, "a"), (2, "b\nc")]
    assert report["rows"]["read"] == 3


def test_a_quote_that_closes_only_past_max_row_bytes_costs_only_its_line(tmp_path: Path) -> None:
    # The quote of line 3 would close at line 2004's first quote: 30 KB later, past the limit.
    lines = ["id,note", "1,a", '2,"opens', *(f"{i},row {i}" for i in range(3, 2003)), '2003,"x"']
    data = ("\n".join(lines) + "\n").encode()
    report, bad = run(tmp_path, data, csv_options={"max_row_bytes": 1024})
    assert bad == {3: '2,"opens'}
    rows = loaded(tmp_path)
    assert rows == [(1, "a")] + [(i, f"row {i}") for i in range(3, 2003)] + [(2003, "x")]
    assert report["rows"]["read"] == 2003


def test_a_crlf_file_with_an_embedded_crlf_and_a_bad_line(tmp_path: Path) -> None:
    data = b'id,note\r\n1,"a\r\nb"\r\n2,"open\r\n3,c\r\n4,d\r\n'
    report, bad = run(tmp_path, data)
    assert bad == {4: '2,"open'}
    assert loaded(tmp_path) == [(1, "a\r\nb"), (3, "c"), (4, "d")]
    assert report["rows"]["read"] == 4


def test_a_quote_inside_an_unquoted_value_is_a_plain_character(tmp_path: Path) -> None:
    # Counting quotes would take 5'10" for an open value and join the lines after it.
    data = b'id,note\n1,5\'10"\n2,"x\ny"\n3,z\n'
    report, bad = run(tmp_path, data)
    assert bad == {}
    assert loaded(tmp_path) == [(1, "5'10\""), (2, "x\ny"), (3, "z")]
    assert report["rows"]["read"] == 3


def test_newlines_in_values_false_makes_a_line_a_row(tmp_path: Path) -> None:
    data = b'id,note\n1,"two\nlines"\n2,b\n'
    report, bad = run(tmp_path, data, csv_options={"newlines_in_values": False})
    assert report["rows"]["read"] == 3  # two bad lines and a row
    assert sorted(bad) == [2, 3]
    assert loaded(tmp_path) == [(2, "b")]


MIXED = (
    b'id,note\r\n1,"a\nb"\r\n2,plain\r\n3,"never\r\n'
    # No quote for more than max_row_bytes after line 5's: that quote costs line 5 alone.
    + b"".join(b"%d,filler row %d\r\n" % (i, i) for i in range(100, 160))
    + b'4,"x ""y""\r\nz"\r\n5,5\'10"\r\n'
    + b"".join(b'%d,"v\n%d"\r\n' % (i, i) for i in range(6, 40))
    + b'40,"open at the end\r\n41,last'
)


def _result(source: FileSource, chunk_size: int) -> tuple[list[Any], list[Any]]:
    chunks = list(source.chunks(chunk_size))
    rows = [row for c in chunks for row in c.batch.to_pylist()]
    failures = [(f.line, f.text) for c in chunks for f in c.failures]
    return rows, failures


@pytest.mark.parametrize("block_size", [16, 100, 1 << 20])
def test_chunk_and_block_sizes_do_not_change_what_is_read(tmp_path: Path, block_size: int) -> None:
    (tmp_path / "x.csv").write_bytes(MIXED)
    config = {
        "type": "file",
        "format": "csv",
        "path": "x.csv",
        "options": {"csv": {"max_row_bytes": 1024}},
    }
    spec = source_spec(config, tmp_path)
    assert isinstance(spec, FileSourceSpec)
    expected = _result(FileSource(spec, read_all_as_text=True), 10_000)
    rows, failures = expected
    ids = ["1", "2", *map(str, range(100, 160)), *map(str, range(4, 40)), "41"]
    assert [r["id"] for r in rows] == ids
    assert rows[62:64] == [{"id": "4", "note": 'x "y"\r\nz'}, {"id": "5", "note": "5'10\""}]
    assert failures == [(5, '3,"never'), (137, '40,"open at the end')]
    for chunk_size in (1, 2, 7):
        source = FileSource(spec, read_all_as_text=True, block_size=block_size)
        assert _result(source, chunk_size) == expected


def test_quoted_line_breaks_load_into_postgres_by_default(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    sink = {"type": "postgres", "connection": "${QUOTED_PG}", "dataset": pg_schema}
    report, bad = run(tmp_path, r_style(ROWS), sink=sink, env={"QUOTED_PG": pg_url})
    assert bad == {}
    assert report["rows"]["read"] == len(ROWS)
    rows = pg_query(pg_url, f'SELECT id, note FROM "{pg_schema}".notes ORDER BY id')
    assert [tuple(r) for r in rows] == ROWS
