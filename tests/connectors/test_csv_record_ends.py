"""Where CSV records end (``connectors/sources/file/quotes.py``), against a reference that reads
the same grammar one byte at a time: random bytes of quotes, delimiters, CRLF, lone CRs and
line breaks inside and outside quoted values, cut anywhere, and files read in small blocks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpone.connectors.fs import LocalFile
from dpone.connectors.sources.file import FileSource
from dpone.connectors.sources.file.blocks import TENTATIVE_REFUSALS, Block, record_blocks
from dpone.connectors.sources.file.quotes import Records
from dpone.manifest.specs import FileSourceSpec

from .specs import source_spec

SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
QUOTE, DELIMITER = b'"', b","


@dataclass(frozen=True)
class Reading:
    """What the reference made of some bytes that start at a record's start."""

    ends: list[int]  # after each line break outside a quoted value
    closed: bool  # no quoted value is open at the end


def reference(data: bytes, quote: bytes = QUOTE, delimiter: bytes = DELIMITER) -> Reading:
    """The grammar, byte by byte: a quote right after the start, a delimiter, a CR or a line
    break opens a quoted value, any other is a plain character; in a quoted value a doubled
    quote is a literal one and a single quote closes it."""
    q, opens_after = quote[0], set(delimiter) | {0x0D, 0x0A}
    ends: list[int] = []
    inside = False
    i = 0
    while i < len(data):
        byte = data[i]
        if inside:
            if byte == q and data[i + 1 : i + 2] == quote:
                i += 2  # a doubled quote, even as the last bytes: no close yet
                continue
            inside = byte != q
        elif byte == q:
            inside = i == 0 or data[i - 1] in opens_after
        elif byte == 0x0A:
            ends.append(i + 1)
        i += 1
    return Reading(ends, not inside)


def reference_split(data: bytes) -> list[tuple[int, bytes]]:
    """The records (and what does not parse as one, to the end) as ``Records.split`` says."""
    out, start = [], 0
    for end in [*reference(data).ends, len(data)]:
        if end > start:
            out.append((data.count(b"\n", 0, start), data[start:end].removesuffix(b"\n")))
        start = end
    return out


#: Pieces that make every case of the grammar when strung together at random.
ATOMS = (b"a", b"bc", b",", b'"', b'""', b"\n", b"\r\n", b"\r", b'"x\ny"', b'"q""q"', b" ")
random_bytes = st.lists(st.sampled_from(ATOMS), max_size=60).map(b"".join)


@st.composite
def csv_files(draw: st.DrawFn) -> bytes:
    """Records as writers make them (quoted values with line breaks, doubled quotes, CRLF),
    with now and then a stray quote in a field or a quote that never closes."""
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    text = st.text(alphabet="ab ,\"\n'", max_size=8).map(str.encode)
    records = []
    for _ in range(draw(st.integers(0, 12))):
        fields = []
        for value in draw(st.lists(text, min_size=1, max_size=4)):
            kind = draw(st.sampled_from(["quoted", "plain", "stray"]))
            if kind == "quoted":
                fields.append(QUOTE + value.replace(QUOTE, QUOTE * 2) + QUOTE)
            elif kind == "plain":
                fields.append(value.replace(QUOTE, b"").replace(b",", b"").replace(b"\n", b""))
            else:
                fields.append(b"5'10" + QUOTE)
        records.append(DELIMITER.join(fields) + newline)
    data = b"".join(records)
    if data and draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + QUOTE + data[at:]  # may open a value that never closes
    return data


any_csv = st.one_of(random_bytes, csv_files())


@SETTINGS
@given(data=any_csv, cut=st.integers(min_value=0))
def test_complete_records_end_where_the_reference_says(data: bytes, cut: int) -> None:
    records = Records(",", QUOTE)
    for piece in (data, data[: cut % (len(data) + 1)]):
        ends = reference(piece).ends
        assert records.complete(piece) == (ends[-1] if ends else 0), piece


@SETTINGS
@given(data=any_csv)
def test_first_closed_and_split_agree_with_the_reference(data: bytes) -> None:
    records = Records(",", QUOTE)
    reading = reference(data)
    assert records.first(data) == (reading.ends[0] if reading.ends else 0)
    assert records.closed(data) is reading.closed
    assert list(records.split(data)) == reference_split(data)


@SETTINGS
@given(data=any_csv, delimiter=st.sampled_from([";", "\t", "|"]), quote=st.sampled_from("'`"))
def test_other_delimiters_and_quote_characters(data: bytes, delimiter: str, quote: str) -> None:
    translated = data.replace(b",", delimiter.encode()).replace(QUOTE, quote.encode())
    records = Records(delimiter, quote.encode())
    ends = reference(translated, quote.encode(), delimiter.encode()).ends
    assert records.complete(translated) == (ends[-1] if ends else 0)


def test_an_unfinished_record_full_of_quoted_line_breaks_is_found_by_the_slow_scan() -> None:
    """More quoted values with line breaks at the end than the quick rescans look back over:
    the scan line by line still gives the last record's end."""
    head = b"1,plain\n2,also plain\n"
    tail = b'3,"a\nb","c\nd","e\nf","g\nh","i\nj","k'
    records = Records(",", QUOTE)
    assert records.complete(head + tail) == len(head)
    assert records.complete(tail) == 0
    assert records.complete(head + tail.removesuffix(b',"k')) == len(head)
    assert records.complete(head + tail + b'"\n') == len(head + tail) + 2


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=any_csv, read=st.integers(min_value=1, max_value=64), refuse_all=st.booleans())
def test_record_blocks_cut_files_at_record_ends_whatever_the_read_size(
    tmp_path: Path, data: bytes, read: int, refuse_all: bool
) -> None:
    """A file read a few bytes at a time (a record spans many reads) comes out whole, in
    blocks of whole records, or as the one line of a quote that never closes. A tentative
    block (cut at a line break before anyone knew it ends a record) that a reader refuses
    comes again, cut where its last record ends; one it takes is never cut again."""
    path = tmp_path / "x.csv"
    path.write_bytes(data)
    records = Records(",", QUOTE)
    blocks: list[Block] = []
    for block in record_blocks(LocalFile(path), "x.csv", "utf-8", read, 1 << 20, records):
        raw = block.raw  # a tentative block is a view, valid until the next one
        if block.tentative is not None:
            assert raw.endswith(b"\n")
            assert block.newlines == raw.count(b"\n")
            if refuse_all or reference(raw).ends[-1:] != [len(raw)]:
                block.tentative.refused = True  # as the reader does when Arrow disagrees
                continue
        blocks.append(Block(raw, block.line, block.newlines, open_quote=block.open_quote))
    assert b"".join(block.raw for block in blocks) == data
    line = 1
    for n, block in enumerate(blocks):
        raw = block.raw
        assert block.line == line
        reading = reference(raw)
        if block.open_quote:
            assert raw.count(b"\n") <= 1
            assert not reading.closed
        elif reading.ends[-1:] != [len(raw)]:
            # Only the file's last record may end without a line break.
            assert n == len(blocks) - 1
            assert reading.closed
            assert not raw.endswith(b"\n")
        line += raw.count(b"\n")


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=csv_files(), read=st.integers(min_value=1, max_value=48))
def test_the_csv_source_reads_the_same_whatever_the_read_size(
    tmp_path: Path, data: bytes, read: int
) -> None:
    """Through the CSV reader, which takes or refuses each tentative block by Arrow's own
    parse: small reads (many tentative cuts, some inside quoted values) give the rows and the
    failed lines of one read of the whole file (no tentative cut), whatever the chunk size."""
    (tmp_path / "x.csv").write_bytes(b"a,b,c\n" + data)
    config = {"type": "file", "format": "csv", "path": "x.csv"}
    spec = source_spec(config, tmp_path)
    assert isinstance(spec, FileSourceSpec)

    def read_all(block_size: int, chunk_size: int) -> tuple[list[Any], list[Any]]:
        source = FileSource(spec, read_all_as_text=True, block_size=block_size)
        chunks = list(source.chunks(chunk_size))
        rows = [row for c in chunks for row in c.batch.to_pylist()]
        return rows, [(f.line, f.text) for c in chunks for f in c.failures]

    whole = read_all(1 << 20, 1000)
    assert read_all(read, 1000) == whole
    assert read_all(read, 2) == whole


def test_a_tentative_block_is_refused_where_a_line_is_not_one_row(tmp_path: Path) -> None:
    """Read 8 bytes at a time: the cuts fall inside the quoted line break, inside the quoted
    value that runs on, and before a blank line; every row still comes out as one read of the
    whole file makes it, and the bytes count once in the progress."""
    data = b'id,note\n1,"a\nb"\n2,"runs\non, and on\n"\n\n3,plain\n4,"x""y"\n'
    (tmp_path / "x.csv").write_bytes(data)
    spec = source_spec({"type": "file", "format": "csv", "path": "x.csv"}, tmp_path)
    assert isinstance(spec, FileSourceSpec)
    source = FileSource(spec, read_all_as_text=True, block_size=8)
    rows = [row for c in source.chunks(100) for row in c.batch.to_pylist()]
    assert rows == [
        {"id": "1", "note": "a\nb"},
        {"id": "2", "note": "runs\non, and on\n"},
        {"id": "3", "note": "plain"},
        {"id": "4", "note": 'x"y'},
    ]
    assert source.read_progress() == (len(data), len(data))


def test_a_file_whose_blocks_keep_being_refused_stops_being_cut_tentatively(
    tmp_path: Path,
) -> None:
    """Every value holds a line break: each tentative block would be refused, and a refusal
    costs a parse; after TENTATIVE_REFUSALS the file is cut where its records end only."""
    path = tmp_path / "x.csv"
    path.write_bytes(b"id,note\n" + b"".join(b'%d,"a\nb"\n' % i for i in range(2000)))
    tentative = 0
    blocks = []
    for block in record_blocks(LocalFile(path), "x.csv", "utf-8", 64, 1 << 20, Records(",", QUOTE)):
        if block.tentative is not None:
            tentative += 1
            block.tentative.refused = True
            continue
        blocks.append(block.raw)
    assert tentative == TENTATIVE_REFUSALS
    assert b"".join(blocks) == path.read_bytes()
