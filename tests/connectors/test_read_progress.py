"""A file source says how many of its bytes it has read (for the progress bar's share and
ETA): block by block for plain CSV and JSON Lines, file by file for compressed files and
Parquet, always ending at exactly the files' size on disk."""

from __future__ import annotations

import gzip
import json
from collections.abc import Generator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dpone import api
from dpone.connectors.progress import MeasuredSource, ReadProgress, compressed
from dpone.connectors.sources.file import FileSource
from dpone.manifest.specs import FileSourceSpec
from dpone.runtime.report import RowCounts, RunProgress
from dpone.testing import MemorySink, MemorySource, run_plan

from .specs import source_spec


def _csv(path: Path, rows: int, *, start: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{i},name-{i:05d}\n" for i in range(start, start + rows))
    path.write_text("id,name\n" + body, encoding="utf-8")
    return path


def _file(
    base: Path,
    path: str,
    fmt: str,
    *,
    block_size: int = 1 << 20,
    csv: dict[str, object] | None = None,
) -> FileSource:
    """A file source over ``base/path`` with the manifest's defaults (``csv``: options.csv)."""
    config: dict[str, object] = {"type": "file", "format": fmt, "path": path}
    if csv:
        config["options"] = {"csv": csv}
    spec = source_spec(config, base)
    assert isinstance(spec, FileSourceSpec)
    return FileSource(spec, read_all_as_text=True, block_size=block_size)


def _read(source: FileSource, chunk_size: int) -> list[tuple[int, int | None]]:
    """The source's progress after each chunk it yields, read to its end."""
    seen = []
    for _ in source.chunks(chunk_size):
        seen.append(source.read_progress())
    seen.append(source.read_progress())
    return seen


def test_a_plain_csv_moves_block_by_block_to_its_size(tmp_path: Path) -> None:
    size = _csv(tmp_path / "a.csv", 400).stat().st_size
    source = _file(tmp_path, "a.csv", "csv", block_size=256)

    seen = _read(source, 20)

    assert isinstance(source, MeasuredSource)
    assert {total for _, total in seen} == {size}
    done = [read for read, _ in seen]
    assert done == sorted(done)
    assert any(0 < read < size for read in done)  # a share in the middle of the file
    assert len(set(done)) > 5
    assert done[-1] == size


def test_several_files_add_up_and_a_compressed_one_moves_when_done(tmp_path: Path) -> None:
    plain = _csv(tmp_path / "d" / "a.csv", 200)
    packed = tmp_path / "d" / "b.csv.gz"
    packed.write_bytes(gzip.compress(_csv(tmp_path / "raw.csv", 200, start=201).read_bytes()))
    total = plain.stat().st_size + packed.stat().st_size
    source = _file(tmp_path, "d/*", "csv", block_size=256)

    chunks = list(source.chunks(50))  # a.csv read whole, then b.csv.gz
    assert [c.partition for c in chunks] == ["d/a.csv"] * 4 + ["d/b.csv.gz"] * 4

    seen = []
    for chunk in source.chunks(50):
        seen.append((chunk.partition, *source.read_progress()))
    assert {t for *_, t in seen} == {total}
    in_packed = [read for partition, read, _ in seen if partition == "d/b.csv.gz"]
    # Its decompressed size is unknown: it counts once read to its end, not block by block.
    assert set(in_packed) == {plain.stat().st_size}
    assert source.read_progress() == (total, total)
    assert compressed(packed)
    assert not compressed(plain)


def test_jsonl_moves_by_block_and_parquet_by_file(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"id": i, "name": f"n{i:04d}"}) + "\n" for i in range(300))
    (tmp_path / "e.jsonl").write_text(lines, encoding="utf-8")
    jsonl = _file(tmp_path, "e.jsonl", "jsonl", block_size=512)
    size = (tmp_path / "e.jsonl").stat().st_size

    done = [read for read, _ in _read(jsonl, 25)]
    assert any(0 < read < size for read in done)
    assert done[-1] == size

    pq.write_table(pa.table({"id": list(range(300))}), tmp_path / "f.parquet", row_group_size=50)
    parquet = _file(tmp_path, "f.parquet", "parquet")
    psize = (tmp_path / "f.parquet").stat().st_size

    assert [read for read, _ in _read(parquet, 50)] == [0] * 6 + [psize]


def test_a_transcoded_file_never_counts_past_its_size(tmp_path: Path) -> None:
    text = "id,name\n" + "".join(f"{i},é{'ü' * 20}\n" for i in range(200))
    (tmp_path / "l.csv").write_bytes(text.encode("latin-1"))  # grows as UTF-8
    source = _file(tmp_path, "l.csv", "csv", block_size=256, csv={"encoding": "latin-1"})
    size = (tmp_path / "l.csv").stat().st_size

    done = [read for read, _ in _read(source, 20)]

    assert max(done) == size
    assert done[-1] == size


def test_each_read_starts_from_zero(tmp_path: Path) -> None:
    assert ReadProgress().snapshot() == (0, None)
    size = _csv(tmp_path / "a.csv", 400).stat().st_size
    source = _file(tmp_path, "a.csv", "csv", block_size=256)
    assert _read(source, 20)[-1] == (size, size)

    again = source.chunks(20)
    assert isinstance(again, Generator)
    next(again)

    read, total = source.read_progress()
    assert 0 < read < size
    assert total == size
    again.close()


def test_a_run_reports_bytes_to_its_progress_callback(tmp_path: Path) -> None:
    data = _csv(tmp_path / "data" / "orders.csv", 120)
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        """
kind: dpone.manifest.v1
name: progress_run
runtime: {work_dir: .dpone, chunk_size: 25}
source: {type: file, format: csv, path: data/*.csv}
sink: {type: duckdb, dataset: analytics, table: names}
""",
        encoding="utf-8",
    )
    events: list[RowCounts] = []

    report = api.run(manifest, on_progress=events.append)

    assert report.exit_code == 0
    assert all(isinstance(e, RunProgress) for e in events)
    progress = [e for e in events if isinstance(e, RunProgress)]
    assert len(progress) == 5 + 1  # five chunks, and the stream's end
    assert {e.bytes_total for e in progress} == {data.stat().st_size}
    read = [e.bytes_read for e in progress]
    assert read == sorted(read)  # type: ignore[type-var]
    assert read[-1] == data.stat().st_size
    assert [e.read for e in progress] == [25, 50, 75, 100, 120, 120]

    # A source that does not know its size: the counts only.
    plan = api.compile(manifest)
    unsized: list[RowCounts] = []
    run_plan(
        plan,
        source=MemorySource([{"id": str(i), "name": "x"} for i in range(30)]),
        sink=MemorySink(),
        on_progress=unsized.append,
    )
    assert [
        (e.read, getattr(e, "bytes_read", 0), getattr(e, "bytes_total", 0)) for e in unsized
    ] == [
        (25, None, None),
        (30, None, None),
        (30, None, None),
    ]
