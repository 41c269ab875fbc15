"""Segment publish: one durable temp file and one create-only link per segment, nothing
reported before it is durable, failures typed and never leaving a temporary file."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dpone.faults
from dpone import durable
from dpone.dlq.errors import DlqDiskFull, DlqStorageError, DlqWriterFailed
from dpone.errors import TransientError
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import (
    lines_of,
    record_ids_on_disk,
    segment_files,
    segments_dir,
    temp_files,
)
from tests.support.dlqrows import StoreFactory, rows

# About 800 bytes a record: 3000 rows are three segments of at most 1 MiB.
BIG = 3000
SPLIT = {"max_segment_bytes": 1_048_576}


def _calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[tuple[Any, ...]]:
    """Record every call of ``owner.name`` (its arguments) and let it through."""
    calls: list[tuple[Any, ...]] = []
    real = getattr(owner, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append((*args, *kwargs.values()))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return calls


def _is_dir(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


@pytest.fixture
def hook() -> Iterator[list[Callable[[str], None]]]:
    """A ``dpone.faults`` hook for the test: each callable appended gets every point passed."""
    hooks: list[Callable[[str], None]] = []

    def call(point: str) -> None:
        for one in hooks:
            one(point)

    dpone.faults._hook = call
    yield hooks
    dpone.faults._hook = None


@pytest.fixture
def short_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.write`` of a :class:`_Short` writes half of it, then fails with ENOSPC."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        if isinstance(data, memoryview) and isinstance(data.obj, _Short):
            if len(data) == len(data.obj):
                return real(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


class _Short(bytes):
    """Bytes the :func:`short_writes` fixture fails to write whole."""


def test_one_fsynced_temp_file_and_one_link_per_chunk(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    writer = make_store().open_run("run-1", "load-1")
    creates = _calls(monkeypatch, durable, "create_exclusive")
    links = _calls(monkeypatch, os, "link")
    order: list[str] = []  # the durable steps, in the order they happen
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd: int) -> None:
        order.append("fsync folder" if _is_dir(fd) else "fsync file")
        real_fsync(fd)

    def link(*args: Any, **kwargs: Any) -> None:
        order.append("link")
        real_link(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    for number, start in enumerate((1, 501), start=1):
        for calls in (creates, links, order):
            calls.clear()
        writer.write_chunk(rows(500, start=start))
        [(_, temp, data, synced, mode)] = creates
        assert synced is True
        assert mode == 0o640
        assert temp.startswith(f".{number:08d}.jsonl.tmp-")
        assert len(lines_of(segment_files(root, "run-1")[-1])) == 500
        assert data == segment_files(root, "run-1")[-1].read_bytes()
        [(src, dst, *_)] = links
        assert (src, dst) == (temp, f"{number:08d}.jsonl")
        assert order == ["fsync file", "link", "fsync folder"]
    monkeypatch.undo()
    assert writer.close().record_count == 1000
    assert temp_files(root, "run-1") == []


def test_a_segment_gets_its_final_name_only_when_whole_and_durable(
    make_store: StoreFactory, root: Path, hook: list[Any]
) -> None:
    writer = make_store().open_run("run-1", "load-1")
    seen: list[tuple[list[str], list[int]]] = []

    def at_publish(point: str) -> None:
        if point == "during_dlq_group_commit":
            folder = segments_dir(root, "run-1")
            names = sorted(p.name for p in folder.iterdir())
            temps = temp_files(root, "run-1")
            seen.append((names, [len(lines_of(p)) for p in temps]))

    hook.append(at_publish)
    ids = writer.write_chunk(rows(20))
    [(names, temp_lines)] = seen
    [name] = names  # no final name yet: only the temp file
    assert name.startswith(".00000001.jsonl.tmp-")
    assert temp_lines == [20]  # the whole segment, before the link
    assert [p.name for p in segment_files(root, "run-1")] == ["00000001.jsonl"]
    assert temp_files(root, "run-1") == []
    assert writer.close().record_ids == tuple(ids)


def test_nothing_is_reported_before_the_publish(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    store = make_store()
    writer = store.open_run("run-1", "load-1")
    real = os.fsync

    def failing_folder_sync(fd: int) -> None:
        if _is_dir(fd):
            raise OSError(errno.EIO, "I/O error")
        real(fd)

    monkeypatch.setattr(os, "fsync", failing_folder_sync)
    with pytest.raises(DlqStorageError) as caught:
        writer.write_chunk(rows(10))  # linked, but the folder fsync failed
    assert isinstance(caught.value, TransientError)
    assert caught.value.errno_name == "EIO"
    monkeypatch.undo()
    [published] = segment_files(root, "run-1")
    data = published.read_bytes()
    with pytest.raises(DlqWriterFailed):
        writer.close()  # ten records on disk were never reported durable
    ids = writer.write_chunk(rows(10))  # the retry reuses them byte for byte, under that name
    assert segment_files(root, "run-1") == [published]
    assert published.read_bytes() == data
    assert record_ids_on_disk(root, "run-1") == sorted(ids)
    assert writer.close().record_ids == tuple(sorted(ids))
    assert verify_store(store) == []


@pytest.mark.parametrize("where", ["temp file", "link"])
def test_a_full_disk_is_transient_and_leaves_no_temp_file(
    make_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    where: str,
    short_writes: None,
) -> None:
    store = make_store(**SPLIT)
    writer = store.open_run("run-1", "load-1")
    first = writer.write_chunk(rows(5))
    real_create, real_link = durable.create_exclusive, os.link
    made: list[str] = []

    def create(dir_fd: int, name: str, data: bytes, *, fsync: bool, mode: int) -> bool:
        if where == "temp file" and len(made) == 1:
            # A partial write, then ENOSPC: create_exclusive must remove what it created.
            return real_create(dir_fd, name, _Short(data), fsync=fsync, mode=mode)
        made.append(name)
        return real_create(dir_fd, name, data, fsync=fsync, mode=mode)

    def link(src: str, dst: str, **kwargs: Any) -> None:
        if where == "link" and len(made) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(durable, "create_exclusive", create)
    monkeypatch.setattr(os, "link", link)
    with pytest.raises(DlqDiskFull) as caught:
        writer.write_chunk(rows(BIG, start=6))  # three segments; the second one fails
    err = caught.value
    assert err.code == "DPONE_DLQ_DISK_FULL"
    assert isinstance(err, TransientError)
    assert err.errno_name == "ENOSPC"
    monkeypatch.undo()
    assert temp_files(root, "run-1") == []
    assert [p.name for p in segment_files(root, "run-1")] == ["00000001.jsonl", "00000002.jsonl"]
    on_disk = record_ids_on_disk(root, "run-1")
    assert set(first) < set(on_disk)
    assert len(on_disk) < 5 + BIG
    result = writer.abort()  # the run fails; what reached the disk is indexed
    assert result.status == "aborted"
    assert list(result.record_ids) == on_disk
    assert verify_store(store) == []


def test_a_write_error_removes_the_file_it_created(tmp_path: Path, short_writes: None) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(TypeError):
            durable.create_exclusive(fd, "x.json", "not bytes", fsync=False)  # type: ignore[arg-type]
        assert not (tmp_path / "x.json").exists()
        with pytest.raises(OSError, match="No space left"):
            durable.create_exclusive(fd, "y.json", _Short(b"0123456789"), fsync=True)
        assert not (tmp_path / "y.json").exists()
        assert durable.create_exclusive(fd, "x.json", b"{}", fsync=True)
        assert not durable.create_exclusive(fd, "x.json", b"[]", fsync=True)
        assert (tmp_path / "x.json").read_bytes() == b"{}"
    finally:
        os.close(fd)


def test_close_refuses_records_a_failed_chunk_left_behind(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    store = make_store(**SPLIT)
    writer = store.open_run("run-1", "load-1")
    writer.write_chunk(rows(5))
    real = durable.create_exclusive
    made: list[str] = []

    def fill_up(dir_fd: int, name: str, data: bytes, *, fsync: bool, mode: int) -> bool:
        if len(made) == 2:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        made.append(name)
        return real(dir_fd, name, data, fsync=fsync, mode=mode)

    monkeypatch.setattr(durable, "create_exclusive", fill_up)
    with pytest.raises(DlqDiskFull):
        writer.write_chunk(rows(BIG, start=6))  # two of its three segments published
    monkeypatch.undo()
    assert len(segment_files(root, "run-1")) == 3
    writer.write_chunk(rows(3, start=10_000))  # another chunk: the orphans stay unreported
    with pytest.raises(DlqWriterFailed):
        writer.close()
    result = writer.abort()
    assert 5 + 3 < result.record_count < 5 + BIG + 3
    assert list(result.record_ids) == record_ids_on_disk(root, "run-1")
    assert verify_store(store) == []


def test_a_retried_chunk_reuses_its_segments(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    store = make_store(**SPLIT)
    writer = store.open_run("run-1", "load-1")
    real = durable.create_exclusive
    made: list[str] = []

    def fill_up(dir_fd: int, name: str, data: bytes, *, fsync: bool, mode: int) -> bool:
        if len(made) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        made.append(name)
        return real(dir_fd, name, data, fsync=fsync, mode=mode)

    monkeypatch.setattr(durable, "create_exclusive", fill_up)
    with pytest.raises(DlqDiskFull):
        writer.write_chunk(rows(BIG))
    monkeypatch.undo()
    [kept] = segment_files(root, "run-1")
    data = kept.read_bytes()

    ids = writer.write_chunk(rows(BIG))  # the same rows again: the published segment counts

    assert len(ids) == len(set(ids)) == BIG
    assert kept.read_bytes() == data
    assert [p.name for p in segment_files(root, "run-1")] == [
        "00000001.jsonl",
        "00000002.jsonl",
        "00000003.jsonl",
    ]
    assert record_ids_on_disk(root, "run-1") == sorted(ids)
    assert writer.close().record_count == BIG
    assert verify_store(store) == []
