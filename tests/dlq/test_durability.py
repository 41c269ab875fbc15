"""Group commit: one sync per chunk, nothing reported before it is durable, failures typed."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from dpone.dlq import fsio
from dpone.dlq.errors import DlqDiskFull, DlqStorageError, DlqWriterFailed
from dpone.errors import TransientError

from .conftest import StoreFactory, record_files, rows


def _count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(fsio, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fsio, name, counting)
    return calls


def test_one_syncfs_per_chunk(make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # dpone's machines (and CI) are Linux: the group commit must take the syncfs path there.
    assert fsio.resolve_sync_mode("auto") == "syncfs"
    syncs = _count_calls(monkeypatch, "syncfs")
    writer = make_store(sync="syncfs").open_run("run-1", "load-1")
    writer.write_chunk(rows(500))
    writer.write_chunk(rows(500, start=501))
    assert len(syncs) == 2
    writer.close()


def test_fsync_strategy_writes_the_same_store(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    syncs = _count_calls(monkeypatch, "syncfs")
    store = make_store(sync="fsync")
    with store.open_run("run-1", "load-1") as writer:
        ids = writer.write_chunk(rows(200))
    assert syncs == []
    assert len(record_files(root, "run-1")) == 200
    assert store.read_index("run-1").record_ids == tuple(ids)
    assert store.verify() == []


def test_nothing_is_reported_before_the_sync(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    writer = make_store().open_run("run-1", "load-1")

    def failing_sync(fd: int, mode: str, where: str) -> None:
        raise DlqStorageError.from_oserror(OSError(errno.EIO, "I/O error"), "sync", where)

    monkeypatch.setattr(fsio, "group_sync", failing_sync)
    with pytest.raises(DlqStorageError) as caught:
        writer.write_chunk(rows(10))
    assert caught.value.transient
    assert isinstance(caught.value, TransientError)
    monkeypatch.undo()
    with pytest.raises(DlqWriterFailed):
        writer.close()  # ten records on disk were never reported durable
    ids = writer.write_chunk(rows(10))  # the retry reuses them byte for byte
    assert sorted(p.stem for p in record_files(root, "run-1")) == sorted(ids)
    assert writer.close().record_count == 10


def test_a_full_disk_is_transient_and_leaves_no_torn_file(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    store = make_store()
    writer = store.open_run("run-1", "load-1")
    writer.write_chunk(rows(5))
    real = fsio.create_exclusive
    made: list[str] = []

    def fill_up(dir_fd: int, name: str, data: bytes, *, fsync: bool) -> bool:
        if len(made) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        made.append(name)
        return real(dir_fd, name, data, fsync=fsync)

    monkeypatch.setattr(fsio, "create_exclusive", fill_up)
    with pytest.raises(DlqDiskFull) as caught:
        writer.write_chunk(rows(10, start=6))
    err = caught.value
    assert err.code == "DPONE_DLQ_DISK_FULL"
    assert err.transient
    assert err.errno_name == "ENOSPC"
    assert len(record_files(root, "run-1")) == 8
    assert all(p.stat().st_size > 0 for p in record_files(root, "run-1"))
    monkeypatch.undo()
    result = writer.abort()  # the run fails; what reached the disk is indexed
    assert result.status == "aborted"
    assert result.record_count == 8
    assert store.verify() == []


def test_a_write_error_removes_the_file_it_created(tmp_path: Path) -> None:
    import os

    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(TypeError):
            fsio.create_exclusive(fd, "x.json", "not bytes", fsync=False)  # type: ignore[arg-type]
        assert not (tmp_path / "x.json").exists()
        assert fsio.create_exclusive(fd, "x.json", b"{}", fsync=True)
        assert not fsio.create_exclusive(fd, "x.json", b"[]", fsync=True)
        assert (tmp_path / "x.json").read_bytes() == b"{}"
    finally:
        os.close(fd)


def test_close_refuses_records_a_failed_chunk_left_behind(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    store = make_store()
    writer = store.open_run("run-1", "load-1")
    writer.write_chunk(rows(5))
    real = fsio.create_exclusive
    made: list[str] = []

    def fill_up(dir_fd: int, name: str, data: bytes, *, fsync: bool) -> bool:
        if len(made) == 2:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        made.append(name)
        return real(dir_fd, name, data, fsync=fsync)

    monkeypatch.setattr(fsio, "create_exclusive", fill_up)
    with pytest.raises(DlqDiskFull):
        writer.write_chunk(rows(10, start=6))
    monkeypatch.undo()
    writer.write_chunk(rows(3, start=100))  # another chunk: the two orphans stay unreported
    with pytest.raises(DlqWriterFailed):
        writer.close()
    result = writer.abort()
    assert result.record_count == 5 + 2 + 3
    assert sorted(result.record_ids) == sorted(p.stem for p in record_files(root, "run-1"))
    assert store.verify() == []
