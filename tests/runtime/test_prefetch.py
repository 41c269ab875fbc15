"""Reading ahead on a thread keeps the source's order, errors, bound and cleanup."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dpone import api
from dpone.api import RunFailed
from dpone.clock import utc_now
from dpone.connectors.fs import HashStopped
from dpone.connectors.sources.file import FileSource
from dpone.errors import ConfigError
from dpone.manifest.specs import FileSourceSpec
from dpone.runtime import prefetch
from dpone.runtime.journal import RunJournal
from dpone.runtime.prefetch import EarlyRead, Inline, ReadAhead, early_chunks, read_early
from dpone.runtime.stream import _chunks
from dpone.runtime.wiring import wire
from tests.connectors.specs import build_source
from tests.support.project import good, make_project


class Tracked:
    """A source iterator that records how far it got, on which thread, and its closing."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.produced = 0
        self.closed_on: str | None = None
        self.opened_on: str | None = None

    def __call__(self) -> Iterator[int]:
        self.opened_on = threading.current_thread().name
        try:
            for i in range(self.count):
                if i == self.fail_at:
                    raise OSError(f"item {i} cannot be read")
                self.produced += 1
                yield i
        finally:
            self.closed_on = threading.current_thread().name


def test_every_item_in_order_then_the_end() -> None:
    source = Tracked(50)
    with ReadAhead(source, depth=2) as items:
        assert list(items) == list(range(50))
        assert next(items, "end") == "end"
    assert source.opened_on == source.closed_on == "dpone-read-ahead"


@pytest.mark.parametrize("depth", [1, 3])
def test_never_more_than_depth_plus_one_ahead(depth: int) -> None:
    source = Tracked(40)
    with ReadAhead(source, depth=depth) as items:
        for consumed, _ in enumerate(items, start=1):
            # ``depth`` wait in the queue, one more may be in the reader's hands.
            assert source.produced <= consumed + depth + 1


def test_an_error_comes_out_where_its_item_would_have() -> None:
    source = Tracked(10, fail_at=6)
    with ReadAhead(source) as items:
        got = [next(items) for _ in range(6)]
        with pytest.raises(OSError, match="item 6 cannot be read"):
            next(items)
        assert next(items, "end") == "end"
    assert got == [0, 1, 2, 3, 4, 5]
    assert source.closed_on == "dpone-read-ahead"


def test_closing_midway_stops_the_reader_and_closes_the_source_on_its_thread() -> None:
    source = Tracked(1_000_000)
    items = ReadAhead(source, depth=1)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert source.closed_on == "dpone-read-ahead"
    assert source.produced <= 3 + 2
    assert next(items, "end") == "end"
    assert not [t for t in threading.enumerate() if t.name == "dpone-read-ahead"]


def test_an_error_in_making_the_iterator_is_raised_by_next() -> None:
    def broken() -> Iterator[int]:
        raise LookupError("no files match")

    with ReadAhead(broken) as items, pytest.raises(LookupError, match="no files match"):
        next(items)


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth"):
        ReadAhead(lambda: iter(()), depth=0)


def test_inline_reads_on_the_callers_thread_and_closes_the_source() -> None:
    source = Tracked(5)
    with Inline(source()) as items:
        assert next(iter(items)) == 0
    assert source.opened_on == source.closed_on == threading.current_thread().name


def _file_source(tmp_path: Path) -> FileSource:
    (tmp_path / "x.csv").write_text("id\n1\n2\n", encoding="utf-8")
    source = build_source(
        {"type": "file", "format": "csv", "path": "x.csv"}, tmp_path, read_all_as_text=True
    )
    assert isinstance(source, FileSource)
    return source


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_file_source_is_read_inline_on_one_core(tmp_path: Path) -> None:
    source = _file_source(tmp_path)
    cores = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cores)})
        with _chunks(source, 10, None) as chunks:
            assert isinstance(chunks, Inline)
            assert [c.num_rows for c in chunks] == [2]
    finally:
        os.sched_setaffinity(0, cores)
    if len(cores) > 1:
        with _chunks(source, 10, None) as chunks:
            assert isinstance(chunks, ReadAhead)
            assert [c.num_rows for c in chunks] == [2]


def _two_cores_or_one() -> set[int]:
    """The cores to run on: two when this process may use two, else its one."""
    cores = sorted(os.sched_getaffinity(0))
    return set(cores[:2])


def test_a_file_run_reads_its_first_chunk_while_it_prepares_on_two_cores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1), good(2)])
    plan = api.compile(project.write_manifest())
    source = wire(plan, env=os.environ, clock=utc_now).source
    cores = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, _two_cores_or_one())
        early = early_chunks(plan, source)
        if len(os.sched_getaffinity(0)) > 1:
            assert isinstance(early, ReadAhead)
            with early as chunks:
                assert [c.num_rows for c in chunks] == [2]
        else:
            assert early is None
        os.sched_setaffinity(0, {min(cores)})
        assert early_chunks(plan, source) is None  # one core: nothing would overlap
    finally:
        os.sched_setaffinity(0, cores)


def test_a_cursor_pushed_to_the_source_or_a_dask_run_is_not_read_early(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1)])
    plan = api.compile(project.write_manifest())
    source = wire(plan, env=os.environ, clock=utc_now).source
    dask = replace(plan, runtime=replace(plan.runtime, engine="dask"))
    assert early_chunks(dask, source) is None
    source.cursor_pushdown = True  # as a SQL source has it
    assert early_chunks(plan, source) is None


def test_a_run_that_fails_before_its_stream_lets_go_of_the_file(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1), good(2)])
    project.write_manifest()
    assert project.run()["exit_code"] == 0
    project.state_path.write_bytes(b"{not json")  # the state is read after the lock
    failed = project.cli()
    assert failed.exit_code != 0
    assert "DPONE_STATE" in failed.stdout
    assert [t.name for t in threading.enumerate() if t.name == "dpone-read-ahead"] == []


def test_a_local_file_is_read_from_right_after_the_compile_on_two_cores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1), good(2), good(3)])
    plan = api.compile(project.write_manifest())
    cores = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, _two_cores_or_one())
        early = read_early(plan, {})
        if len(os.sched_getaffinity(0)) > 1:
            assert early is not None
            assert isinstance(early.source, FileSource)
            with early.chunks as chunks:
                assert [c.num_rows for c in chunks] == [3]
        else:
            assert early is None
        dask = replace(plan, runtime=replace(plan.runtime, engine="dask"))
        assert read_early(dask, {}) is None
        assert isinstance(plan.source.spec, FileSourceSpec)
        prevalidated = replace(plan.source, spec=replace(plan.source.spec, prevalidated=True))
        assert read_early(replace(plan, source=prevalidated), {}) is None
        os.sched_setaffinity(0, {min(cores)})
        assert read_early(plan, {}) is None  # one core: nothing would overlap
    finally:
        os.sched_setaffinity(0, cores)


def test_a_run_reads_its_file_once_through_the_early_source(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api.run`` on two cores builds the source before the wiring, which takes it as it is:
    the file source is built once, its early chunks are the run's, every row is loaded. On
    one core the wiring builds it, once, and the run loads the same rows."""
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(i) for i in range(1, 6)])
    manifest = project.write_manifest()
    built: list[FileSource] = []
    early: list[EarlyRead | None] = []
    wired: list[object] = []
    real_init, real_read_early, real_wire = FileSource.__init__, prefetch.read_early, wire

    def counted(self: FileSource, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        real_init(self, *args, **kwargs)

    def recorded(*args: Any, **kwargs: Any) -> EarlyRead | None:
        early.append(real_read_early(*args, **kwargs))
        return early[-1]

    def wiring(*args: Any, **kwargs: Any) -> Any:
        wired.append(kwargs["source"])
        return real_wire(*args, **kwargs)

    monkeypatch.setattr(FileSource, "__init__", counted)
    monkeypatch.setattr(prefetch, "read_early", recorded)
    monkeypatch.setattr("dpone.runtime.lifecycle.wire", wiring)
    cores = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, _two_cores_or_one())
        two = len(os.sched_getaffinity(0)) > 1
        report = api.run(manifest, env=project.env)
    finally:
        os.sched_setaffinity(0, cores)
    assert report.exit_code == 0
    assert report.rows.loaded == 5
    assert len(early) == 1
    assert len(built) == 1
    if two:
        assert early[0] is not None
        assert built == [early[0].source]
        assert wired == [early[0].source]
    else:
        assert early == [None]
        assert wired == [None]  # the wiring builds the source itself
    rows = project.rows()
    assert rows is not None
    assert len(rows) == 5
    assert [t.name for t in threading.enumerate() if t.name == "dpone-read-ahead"] == []


def test_a_locked_pipeline_drops_what_was_read_early_without_hashing_the_rest(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run refused at its lock, after it began reading early (two cores): refused as before,
    its reader gone, and the file's hashing stopped rather than waited for (a large file's
    hash would take seconds). On one core nothing is read before the lock."""
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(i) for i in range(1, 4)])
    manifest = project.write_manifest()
    outcome: list[str] = []

    def slow(path: Path, stop: threading.Event | None = None) -> str:
        assert stop is not None
        outcome.append("stopped" if stop.wait(timeout=30) else "hashed to the end")
        raise HashStopped(str(path))

    monkeypatch.setattr("dpone.connectors.fs.sha256_file", slow)
    holder = RunJournal(project.work_dir / "runs", project.name)
    cores = os.sched_getaffinity(0)
    holder.lock()
    try:
        os.sched_setaffinity(0, _two_cores_or_one())
        two = len(os.sched_getaffinity(0)) > 1
        with pytest.raises(RunFailed) as refused:
            api.run(manifest, env=project.env)
    finally:
        os.sched_setaffinity(0, cores)
        holder.unlock()
    assert refused.value.code == "DPONE_PIPELINE_LOCKED"
    assert outcome == (["stopped"] if two else [])
    assert [t.name for t in threading.enumerate() if t.name == "dpone-read-ahead"] == []
    assert project.rows() is None


def test_a_source_the_early_read_cannot_build_fails_where_the_run_wires_it(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A hand-made plan whose file source is refused: no early read, and the run fails with
    the source's own configuration error where the run wires it, as without reading early."""
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1)])
    plan = api.compile(project.write_manifest())
    assert isinstance(plan.source.spec, FileSourceSpec)
    broken = replace(plan.source, spec=replace(plan.source.spec, path="data\\rows.csv"))
    plan = replace(plan, source=broken)
    cores = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, _two_cores_or_one())
        assert read_early(plan, {}) is None
        with pytest.raises(ConfigError) as refused:
            api.run(plan, env=project.env)
    finally:
        os.sched_setaffinity(0, cores)
    assert refused.value.code == "DPONE_SOURCE_CONFIG"
    assert [t.name for t in threading.enumerate() if t.name == "dpone-read-ahead"] == []
