"""File sources against real files: chunk boundaries, order, row numbers, hashes, memory."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpone.connectors import SourceChunk
from dpone.connectors.base import DecodeFailure
from dpone.connectors.errors import (
    SourceConfigError,
    SourceDecodeError,
    SourceNoFiles,
    SourceRowTooLong,
    SourceUnavailable,
)
from dpone.connectors.fs import HASH_READ, HashStopped, sha256_file
from dpone.connectors.sources.file import FileSource
from dpone.connectors.sources.file.blocks import MAX_FAILURE_TEXT, nth_newline
from dpone.connectors.sources.file.csv import SALVAGE_BYTES
from dpone.errors import ManifestError
from dpone.manifest.specs import FileSourceSpec

from .specs import build_source, source_spec


def write_csv(path: Path, rows: list[tuple[int, str]], header: str = "id,name") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [header] + [f"{i},{name}" for i, name in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def csv_source(base: Path, pattern: str, **options: object) -> FileSource:
    config = {"type": "file", "format": "csv", "path": pattern, "options": {"csv": options}}
    source = build_source(config, base, read_all_as_text=True)
    assert isinstance(source, FileSource)
    return source


def spec_config(path: str) -> dict[str, object]:
    return {"type": "file", "format": "csv", "path": path}


def csv_spec(base: Path, pattern: str) -> FileSourceSpec:
    spec = source_spec(spec_config(pattern), base)
    assert isinstance(spec, FileSourceSpec)
    return spec


def test_csv_chunks_are_exact_sorted_and_numbered(tmp_path: Path) -> None:
    write_csv(tmp_path / "data" / "b.csv", [(i, f"b{i}") for i in range(1, 8)])
    write_csv(tmp_path / "data" / "a.csv", [(i, f"a{i}") for i in range(1, 11)])
    (tmp_path / "data" / "notes.txt").write_text("not matched")
    source = csv_source(tmp_path, "data/*.csv")

    chunks = list(source.chunks(4))

    assert [(c.partition, c.first_row, c.num_rows) for c in chunks] == [
        ("data/a.csv", 1, 4),
        ("data/a.csv", 5, 4),
        ("data/a.csv", 9, 2),
        ("data/b.csv", 1, 4),
        ("data/b.csv", 5, 3),
    ]
    for chunk in chunks:
        expected = hashlib.sha256((tmp_path / chunk.partition).read_bytes()).hexdigest()
        assert chunk.file_sha256 == expected
        assert chunk.rereadable
        assert chunk.batch.schema == pa.schema([("id", pa.string()), ("name", pa.string())])
    # Row numbers point at the row itself: the 9th data row of a.csv has id 9.
    assert chunks[2].batch.column("id").to_pylist() == ["9", "10"]
    assert source.identity == "file:csv:data/*.csv"
    assert source.cursor_pushdown is False


def test_csv_chunks_across_many_arrow_blocks(tmp_path: Path) -> None:
    write_csv(tmp_path / "big.csv", [(i, "x" * 20) for i in range(1, 5001)])
    source = FileSource(csv_spec(tmp_path, "big.csv"), read_all_as_text=True, block_size=4096)

    chunks = list(source.chunks(777))

    assert all(c.num_rows == 777 for c in chunks[:-1])
    assert sum(c.num_rows for c in chunks) == 5000
    ids = [int(v) for c in chunks for v in c.batch.column("id").to_pylist()]
    assert ids == list(range(1, 5001))
    assert [c.first_row for c in chunks] == [1 + 777 * k for k in range(len(chunks))]


@pytest.mark.parametrize("chunk_size", [1, 97, 1000, 100_000])
@pytest.mark.parametrize("block_size", [512, 1 << 20])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_csv_rows_and_bad_lines_keep_their_numbers_across_blocks(
    tmp_path: Path, chunk_size: int, block_size: int, newline: str
) -> None:
    """Blocks are cut at whole chunks of lines, and a block that fails is parsed again in
    parts: rows come out in order, exactly chunk-sized, and each bad line is named once."""
    lines: list[bytes] = [b"id,name,note"]
    good: list[str] = []
    bad: list[int] = []
    for i in range(1, 3001):
        number = len(lines) + 1  # the physical line this one will be
        if i % 701 == 0:
            lines.append(f"{i},too,many,fields".encode())
            bad.append(number)
        elif i % 977 == 0:
            lines.append(f"{i},\xff".encode("latin-1"))  # not UTF-8
            bad.append(number)
        elif i % 1201 == 0:
            lines.append(f'{i},"never closed,x'.encode())
            bad.append(number)
        elif i % 499 == 0:
            lines.append(b"")  # a blank line: no row, no failure
        else:
            note = '"a, quoted ""note"""' if i % 3 == 0 else "plain"
            lines.append(f"{i},name {i},{note}".encode())
            good.append(str(i))
    (tmp_path / "x.csv").write_bytes(newline.encode().join(lines))  # no final newline
    # A line is a row here: the quote that is never closed costs its line alone.
    source = _sized(tmp_path, "x.csv", block_size, newlines_in_values=False)

    chunks = list(source.chunks(chunk_size))

    ids = [v for c in chunks for v in c.batch.column("id").to_pylist()]
    assert ids == good
    assert sorted(f.line for c in chunks for f in c.failures) == bad  # each once
    with_rows = [c for c in chunks if c.num_rows]
    assert all(c.num_rows == chunk_size for c in with_rows[:-1])
    assert [c.first_row for c in with_rows] == [1 + chunk_size * k for k in range(len(with_rows))]
    notes = [v for c in chunks for v in c.batch.column("note").to_pylist()]
    assert notes.count('a, quoted "note"') == sum(1 for i in good if int(i) % 3 == 0)


def test_a_quote_that_swallows_lines_is_caught_in_a_big_block(tmp_path: Path) -> None:
    rows = [f"{i},x{i}" for i in range(1, 2001)]
    rows[1500] = '1501,"opens here'  # Arrow would take the lines after it into one value
    rows[1502] = '1503,closes" there'  # a quote inside a field is a plain character
    (tmp_path / "x.csv").write_text("id,name\n" + "\n".join(rows) + "\n")
    chunks = list(csv_source(tmp_path, "x.csv", newlines_in_values=False).chunks(5000))
    ids = [int(v) for c in chunks for v in c.batch.column("id").to_pylist()]
    assert ids == [i for i in range(1, 2001) if i != 1501]
    assert all("\n" not in v for c in chunks for v in c.batch.column("name").to_pylist())
    assert [f.line for c in chunks for f in c.failures] == [1502]


@pytest.mark.parametrize("block_size", [100, 1000, 1 << 20])
@pytest.mark.parametrize("where", [2, 40, 100])  # the long line's number
def test_a_line_past_max_row_bytes_is_refused_with_its_number(
    tmp_path: Path, block_size: int, where: int
) -> None:
    lines = ["id,name"] + [f"{i},x" for i in range(1, 100)]
    lines[where - 1] = "7," + "y" * 1100
    (tmp_path / "x.csv").write_text("\n".join(lines))
    spec = csv_spec(tmp_path, "x.csv")
    spec = dataclasses.replace(spec, csv=dataclasses.replace(spec.csv, max_row_bytes=1024))
    source = FileSource(spec, read_all_as_text=True, block_size=block_size)
    with pytest.raises(SourceRowTooLong) as caught:
        list(source.chunks(10))
    assert caught.value.line == where
    lines[where - 1] = "7," + "y" * 1022  # exactly the limit
    (tmp_path / "x.csv").write_text("\n".join(lines))
    assert sum(c.num_rows for c in source.chunks(10)) == 99


def test_a_lone_carriage_return_is_not_taken_for_one_row_per_line(tmp_path: Path) -> None:
    # Arrow ends a row at a lone \r too: rows and \n-lines may then agree by accident.
    data = b'id,name\n1,"a\nb"\n2,x\r3,y\n'
    (tmp_path / "x.csv").write_bytes(data)
    chunks = list(csv_source(tmp_path, "x.csv", newlines_in_values=False).chunks(10))
    names = [v for c in chunks for v in c.batch.column("name").to_pylist()]
    assert all("\n" not in v for v in names)


def _read_all(source: FileSource, chunk_size: int) -> tuple[list[str], list[DecodeFailure]]:
    chunks = list(source.chunks(chunk_size))
    ids = [v for c in chunks for v in c.batch.column("id").to_pylist()]
    return ids, [f for c in chunks for f in c.failures]


def _sized(base: Path, name: str, block_size: int, **csv: Any) -> FileSource:
    spec = csv_spec(base, name)
    spec = dataclasses.replace(spec, csv=dataclasses.replace(spec.csv, **csv))
    return FileSource(spec, read_all_as_text=True, block_size=block_size)


@pytest.mark.parametrize("newlines_in_values", [False, True])
def test_a_chunk_parsed_in_small_arrow_blocks_reads_as_one_parsed_whole(
    tmp_path: Path, newlines_in_values: bool
) -> None:
    """Arrow parses a chunk's block in blocks of 4 reads (here 2 KiB): rows longer than that,
    bad lines and quoted line breaks come out as when the block is parsed at once, with the
    same failures (line, reason, text)."""
    lines = [b"id,name,note"]
    for i in range(1, 601):
        if i == 50:
            lines.append(b"50,long," + b"z" * 3000)  # longer than Arrow's block
        elif i == 120:
            lines.append(b"120,too,many,fields")
        elif i == 200:
            lines.append(b"200,\xff,x")  # not UTF-8
        elif i == 300:
            lines.append(b'300,"two\nlines",x')  # a value with a line break, quoted
        elif i == 400:
            lines.append(b"401,bad," + b"q," * 2000)  # long and bad
        else:
            lines.append(f"{i},name {i},note {i}".encode())
    (tmp_path / "x.csv").write_bytes(b"\n".join(lines) + b"\n")

    small = _read_all(_sized(tmp_path, "x.csv", 512, newlines_in_values=newlines_in_values), 250)
    whole = _read_all(
        _sized(tmp_path, "x.csv", 1 << 20, newlines_in_values=newlines_in_values), 250
    )

    assert small == whole
    ids, failures = small
    bad = {120, 200, 400} if newlines_in_values else {120, 200, 300, 400}
    assert ids == [str(i) for i in range(1, 601) if i not in bad]
    # Physical lines: the header is line 1, row 300 takes lines 301 and 302 (two bad lines
    # without newlines_in_values), the rows after it are one line further down.
    expected = [121, 201, 402] if newlines_in_values else [121, 201, 301, 302, 402]
    assert [f.line for f in failures] == expected
    assert failures[0].what == "the line does not parse as a row of 3 fields"
    assert failures[1].what == "the line is not valid text in the file's encoding"


def test_a_bad_line_longer_than_a_salvage_part_fails_alone(tmp_path: Path) -> None:
    long_bad = b"3," + b"y" * (SALVAGE_BYTES + (1 << 19)) + b",extra"
    data = b"id,name\n1,a\n2,b\n" + long_bad + b"\n4,d\n5,e\n"
    (tmp_path / "x.csv").write_bytes(data)
    ids, failures = _read_all(csv_source(tmp_path, "x.csv"), 1000)
    assert ids == ["1", "2", "4", "5"]
    assert [(f.line, f.what) for f in failures] == [
        (4, "the line does not parse as a row of 2 fields")
    ]
    assert len(failures[0].text) == MAX_FAILURE_TEXT


@pytest.mark.parametrize("block_size", [16, 512, 1 << 20])
def test_a_header_after_a_bom_and_blank_lines_with_crlf(tmp_path: Path, block_size: int) -> None:
    body = "\r\n".join(f"{i},n{i}" if i != 7 else "7,x,y" for i in range(1, 40))
    (tmp_path / "x.csv").write_bytes(("\ufeff\r\n\r\nid,name\r\n" + body + "\r\n").encode())
    chunks = list(_sized(tmp_path, "x.csv", block_size).chunks(10))
    assert chunks[0].batch.schema.names == ["id", "name"]
    ids = [v for c in chunks for v in c.batch.column("id").to_pylist()]
    assert ids == [str(i) for i in range(1, 40) if i != 7]
    assert [n for c in chunks for n in c.batch.column("name").to_pylist()][:2] == ["n1", "n2"]
    assert [f.line for c in chunks for f in c.failures] == [10]  # 3 lines before the header


def test_csv_options_delimiter_quote_nulls_encoding_and_no_header(tmp_path: Path) -> None:
    text = "1;'a;b';NULL\n2;'';x\n"
    (tmp_path / "x.csv").write_bytes(text.encode("latin-1"))
    source = csv_source(
        tmp_path,
        "x.csv",
        delimiter=";",
        quote_char="'",
        header=False,
        encoding="latin-1",
        null_values=["NULL"],
    )

    (chunk,) = list(source.chunks(10))

    assert chunk.batch.to_pylist() == [
        {"f0": "1", "f1": "a;b", "f2": None},
        {"f0": "2", "f1": "", "f2": "x"},
    ]


def test_csv_keeps_empty_strings_and_text_by_default(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text('id,amount,note\n007,12.30,\n8,1e2,"multi\nline"\n')
    (chunk,) = list(csv_source(tmp_path, "x.csv").chunks(10))
    assert chunk.batch.to_pylist() == [
        {"id": "007", "amount": "12.30", "note": ""},
        {"id": "8", "amount": "1e2", "note": "multi\nline"},
    ]
    assert chunk.failures == ()


def test_csv_quote_spanning_lines_is_two_bad_lines_when_a_line_is_a_row(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text('id,amount,note\n007,12.30,\n8,1e2,"multi\nline"\n9,1,z\n')
    (chunk,) = list(csv_source(tmp_path, "x.csv", newlines_in_values=False).chunks(10))
    assert chunk.batch.to_pylist() == [
        {"id": "007", "amount": "12.30", "note": ""},
        {"id": "9", "amount": "1", "note": "z"},
    ]
    assert [f.line for f in chunk.failures] == [3, 4]


def test_csv_typed_mode_lets_arrow_infer(tmp_path: Path) -> None:
    write_csv(tmp_path / "x.csv", [(1, "a"), (2, "b")])
    config = {"type": "file", "format": "csv", "path": "x.csv"}
    (chunk,) = list(build_source(config, tmp_path, read_all_as_text=False).chunks(10))
    assert chunk.batch.schema.field("id").type == pa.int64()


def test_csv_bad_row_is_a_decode_failure_of_its_line_without_values(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("id,name\n1,a\n2,secret-value,extra\n3,c\n")
    (chunk,) = list(csv_source(tmp_path, "x.csv").chunks(10))
    assert chunk.batch.column("id").to_pylist() == ["1", "3"]
    (failure,) = chunk.failures
    assert failure.line == 3
    assert "secret-value" not in failure.what
    assert failure.what == "the line does not parse as a row of 2 fields"


def test_csv_invalid_utf8_is_a_decode_failure_of_its_line(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_bytes(b"id,name\n1,\xff\xfe\n2,b\n")
    (chunk,) = list(csv_source(tmp_path, "x.csv").chunks(10))
    assert chunk.batch.column("id").to_pylist() == ["2"]
    assert [(f.line, f.what) for f in chunk.failures] == [
        (2, "the line is not valid text in the file's encoding")
    ]


def test_an_empty_file_yields_nothing_and_a_header_only_file_its_columns(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.csv").write_text("")
    (tmp_path / "b.csv").write_text("id,name\n")
    (chunk,) = csv_source(tmp_path, "*.csv").chunks(10)
    # No row, but the header's columns (as text), so a run still makes the table.
    assert (chunk.partition, chunk.num_rows, chunk.first_row) == ("b.csv", 0, 1)
    assert chunk.batch.schema == pa.schema([("id", pa.string()), ("name", pa.string())])


def test_glob_matching_nothing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceNoFiles) as info:
        list(csv_source(tmp_path, "data/*.csv").chunks(10))
    assert info.value.code == "DPONE_SOURCE_NO_FILES"
    assert str(tmp_path) not in str(info.value)


def test_malformed_path_and_bad_options_are_config_errors(tmp_path: Path) -> None:
    spec = csv_spec(tmp_path, "x.csv")
    for path in ("http://h/x.csv", "s3://bucket/../x.csv", "a\x00.csv", "~bob/x", "data/", ".."):
        with pytest.raises(ManifestError):  # the compiler refuses them first
            source_spec(spec_config(path), tmp_path)
        with pytest.raises(SourceConfigError):  # and so does a spec built by hand
            FileSource(dataclasses.replace(spec, path=path), read_all_as_text=True)
    for options in ({"delimiter": ";;"}, {"encoding": "no-such-codec"}, {"separator": ";"}):
        with pytest.raises(ManifestError):
            source_spec({**spec_config("x.csv"), "options": {"csv": options}}, tmp_path)
    bad_codec = dataclasses.replace(spec.csv, encoding="no-such-codec")
    with pytest.raises(SourceConfigError):
        FileSource(dataclasses.replace(spec, csv=bad_codec), read_all_as_text=True)


def test_csv_memory_is_bounded_by_the_chunk(tmp_path: Path) -> None:
    """A ~50 MB file streams through in chunks; Arrow and Python allocations stay small."""
    path = tmp_path / "big.csv"
    row = "{},2026-01-01T00:00:00Z,some text that pads the row to a realistic width,12.34\n"
    block = "".join(row.format(i) for i in range(10_000)).encode()
    with path.open("wb") as fh:
        fh.write(b"id,ts,note,amount\n")
        while fh.tell() < 50 * 1024 * 1024:
            fh.write(block)
    size = path.stat().st_size
    source = FileSource(csv_spec(tmp_path, "big.csv"), read_all_as_text=True)

    baseline = pa.total_allocated_bytes()
    peak_arrow = 0
    rows = 0
    max_rows = 0
    tracemalloc.start()
    try:
        for chunk in source.chunks(10_000):
            rows += chunk.num_rows
            max_rows = max(max_rows, chunk.num_rows)
            peak_arrow = max(peak_arrow, pa.total_allocated_bytes() - baseline)
            del chunk
        _, peak_python = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert rows > 500_000
    assert max_rows == 10_000
    assert peak_arrow < min(size // 2, 24 * 1024 * 1024), (peak_arrow, size)
    assert peak_python < 16 * 1024 * 1024


def test_parquet_row_groups_rechunked(tmp_path: Path) -> None:
    table = pa.table(
        {"id": pa.array(range(1, 1001), pa.int64()), "v": [str(i) for i in range(1000)]}
    )
    pq.write_table(table, tmp_path / "p.parquet", row_group_size=300)
    config = {"type": "file", "format": "parquet", "path": "*.parquet"}
    source = build_source(config, tmp_path, read_all_as_text=True)

    chunks = list(source.chunks(400))

    assert [(c.first_row, c.num_rows) for c in chunks] == [(1, 400), (401, 400), (801, 200)]
    assert chunks[0].batch.schema.field("id").type == pa.int64()  # Parquet keeps its types
    assert pa.Table.from_batches([c.batch for c in chunks]).equals(table)
    digest = hashlib.sha256((tmp_path / "p.parquet").read_bytes()).hexdigest()
    assert {c.file_sha256 for c in chunks} == {digest}


def test_corrupt_parquet_is_a_decode_error(tmp_path: Path) -> None:
    (tmp_path / "p.parquet").write_bytes(b"not parquet at all")
    source = build_source(
        {"type": "file", "format": "parquet", "path": "p.parquet"}, tmp_path, read_all_as_text=True
    )
    with pytest.raises(SourceDecodeError):
        list(source.chunks(10))


def jsonl(tmp_path: Path, lines: list[str], *, as_text: bool = True) -> list[SourceChunk]:
    (tmp_path / "x.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {"type": "file", "format": "jsonl", "path": "x.jsonl"}
    return list(build_source(config, tmp_path, read_all_as_text=as_text).chunks(2))


def test_jsonl_as_text_keeps_exact_values_and_numbers_blank_lines_out(tmp_path: Path) -> None:
    lines = [
        '{"id": 1, "amount": 12.30, "ok": true, "tags": [1, 2.50], "meta": {"a": "x"}}',
        "",
        '{"id": "2", "amount": null, "extra": "only here"}',
        '{"id": 3}',
    ]
    chunks = jsonl(tmp_path, lines)

    assert [(c.first_row, c.num_rows) for c in chunks] == [(1, 2), (3, 1)]
    assert chunks[0].batch.to_pylist() == [
        {
            "id": "1",
            "amount": "12.30",
            "ok": "true",
            "tags": "[1,2.50]",
            "meta": '{"a":"x"}',
            "extra": None,
        },
        {"id": "2", "amount": None, "ok": None, "tags": None, "meta": None, "extra": "only here"},
    ]
    assert all(f.type == pa.string() for f in chunks[0].batch.schema)


def test_jsonl_typed_mode_and_errors(tmp_path: Path) -> None:
    chunks = jsonl(tmp_path, ['{"id": 1, "v": 1.5}', '{"id": 2, "v": 2.5}'], as_text=False)
    assert chunks[0].batch.schema.field("id").type == pa.int64()
    with pytest.raises(SourceDecodeError):
        jsonl(tmp_path, ['{"id": 1}', '{"id": "x"}'], as_text=False)
    (chunk,) = jsonl(tmp_path, ['{"id": 1}', '["secret", 2]'])
    assert [(f.line, f.what) for f in chunk.failures] == [(2, "the line is not a JSON object")]
    (chunk,) = jsonl(tmp_path, ['{"id": 1', "{}"])
    assert [(f.line, f.what) for f in chunk.failures] == [(1, "the line is not valid JSON")]


def test_jsonl_streams_large_files_in_line_groups(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(1, 2501)))
    source = build_source(
        {"type": "file", "format": "jsonl", "path": "x.jsonl"}, tmp_path, read_all_as_text=True
    )
    chunks = list(source.chunks(1000))
    assert [(c.first_row, c.num_rows) for c in chunks] == [(1, 1000), (1001, 1000), (2001, 500)]
    assert chunks[2].batch.column("id")[0].as_py() == "2001"


def test_jsonl_encoding_option_and_invalid_text(tmp_path: Path) -> None:
    (tmp_path / "u16.jsonl").write_text('{"name": "Zoë"}\n{"name": "Ünï"}\n', encoding="utf-16")
    config = {
        "type": "file",
        "format": "jsonl",
        "path": "u16.jsonl",
        "options": {"jsonl": {"encoding": "utf-16"}},
    }
    (chunk,) = list(build_source(config, tmp_path, read_all_as_text=True).chunks(10))
    assert chunk.batch.column("name").to_pylist() == ["Zoë", "Ünï"]
    (tmp_path / "bad.jsonl").write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    bad = build_source(
        {"type": "file", "format": "jsonl", "path": "bad.jsonl"}, tmp_path, read_all_as_text=True
    )
    (chunk,) = list(bad.chunks(10))
    assert chunk.num_rows == 1
    assert [f.line for f in chunk.failures] == [2]


@given(
    lines=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=60),
    pad=st.integers(min_value=0, max_value=5),
    data=st.data(),
)
def test_the_nth_line_break_is_found_from_either_side_of_the_guess(
    lines: list[int], pad: int, data: st.DataObject
) -> None:
    """The block cut: the n-th line break of buf[lo:hi], whichever side of the guess the
    reader counts (lines of any length, the cut early or late in what was read)."""
    body = b"".join(b"x" * width + b"\n" for width in lines) + b"y" * data.draw(st.integers(0, 9))
    buf = b"z" * pad + body + b"\n" * pad  # bytes outside [lo, hi) never count
    lo, hi = pad, pad + len(body)
    total = body.count(b"\n")
    n = data.draw(st.integers(min_value=1, max_value=total))
    breaks = [lo + i for i, byte in enumerate(body) if byte == 0x0A]
    assert nth_newline(buf, n, total, lo, hi) == breaks[n - 1]


@pytest.mark.parametrize(
    ("data", "options", "line"),
    [
        (b"id,na\xffme\n1,a\n", {}, 1),
        (b"\n\r\nid,na\xffme\n1,a\n", {}, 3),  # blank lines before the header are skipped
        (b"id,na\xe9me\n1,a\n", {"encoding": "utf-8"}, 1),  # a Latin-1 name in a UTF-8 file
    ],
)
def test_a_header_that_is_not_text_is_a_decode_error_at_its_line(
    tmp_path: Path, data: bytes, options: dict[str, object], line: int
) -> None:
    (tmp_path / "d.csv").write_bytes(data)
    with pytest.raises(SourceDecodeError) as caught:
        list(csv_source(tmp_path, "d.csv", **options).chunks(10))
    assert (caught.value.code, caught.value.line) == ("DPONE_SOURCE_DECODE_FAILED", line)
    assert "na" not in caught.value.message  # the header's text is not repeated


def test_a_latin1_header_decodes_under_its_encoding(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_bytes(b"id,na\xefve\n1,a\n")
    (chunk,) = list(csv_source(tmp_path, "d.csv", encoding="latin-1").chunks(10))
    assert chunk.batch.schema.names == ["id", "naïve"]


def test_a_file_that_cannot_be_hashed_hands_out_no_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hash runs beside the parse of the first chunk; when it fails, that chunk (whose
    record refs would name the hash) is never handed out: the read fails as unavailable."""
    write_csv(tmp_path / "a.csv", [(i, f"n{i}") for i in range(1, 50)])

    def unreadable(path: Path, stop: threading.Event | None = None) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("dpone.connectors.fs.sha256_file", unreadable)
    chunks = csv_source(tmp_path, "a.csv").chunks(10)
    with pytest.raises(
        SourceUnavailable, match=r"a\.csv: cannot read the file \(PermissionError\)"
    ):
        next(chunks)


def test_a_file_is_hashed_in_pieces_and_the_hashing_stops_when_asked(tmp_path: Path) -> None:
    """``sha256_file`` is the file's SHA-256 across several reads; once ``stop`` is set it
    raises instead of reading on."""
    path = tmp_path / "big.bin"
    data = bytes(range(256)) * (3 * HASH_READ // 256 + 7)
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_file(path, threading.Event()) == hashlib.sha256(data).hexdigest()
    stop = threading.Event()
    stop.set()
    with pytest.raises(HashStopped):
        sha256_file(path, stop)


def test_a_source_stopped_while_it_hashes_hands_out_no_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stop_reading`` ends the hashing of the file being read: the reader waiting for the
    hash before its first chunk fails as unavailable instead of waiting for the whole file."""
    write_csv(tmp_path / "a.csv", [(i, f"n{i}") for i in range(1, 50)])
    hashing = threading.Event()

    def slow(path: Path, stop: threading.Event | None = None) -> str:
        assert stop is not None
        hashing.set()
        if not stop.wait(timeout=30):
            return "0" * 64  # never stopped: the test fails below
        raise HashStopped(str(path))

    monkeypatch.setattr("dpone.connectors.fs.sha256_file", slow)
    source = csv_source(tmp_path, "a.csv")
    chunks = source.chunks(10)

    def stop_once_hashing() -> None:
        if hashing.wait(timeout=30):
            source.stop_reading()

    stopper = threading.Thread(target=stop_once_hashing)
    stopper.start()
    with pytest.raises(SourceUnavailable, match=r"a\.csv: reading the file was stopped"):
        next(chunks)
    stopper.join()
