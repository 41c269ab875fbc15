"""Create-only publishing: atomic always, durable (fsynced) unless the caller says the file
does not outlive the machine's page cache (a scale-out run's staged Parquet)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpone.durable import create_only


@pytest.mark.parametrize(("fsync", "syncs"), [(True, 2), (False, 0)])
def test_create_only_publishes_once_and_fsyncs_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool, syncs: int
) -> None:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    target = tmp_path / "p00000-c000000.parquet"
    create_only(target, b"first", anchor=tmp_path, fsync=fsync)
    assert target.read_bytes() == b"first"
    assert len(calls) == syncs  # the file and its folder, or nothing
    with pytest.raises(FileExistsError):
        create_only(target, b"second", anchor=tmp_path, fsync=fsync)
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temp file left
