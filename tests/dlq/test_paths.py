"""Path safety: ``..``, absolute ids and symlinks planted inside the store are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpone.dlq.errors import DlqPathEscape
from dpone.dlq.store import DlqStore
from dpone.ops.repair import repair_store
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import segment_files, segments_dir, temp_files
from tests.support.dlqrows import rows

ACK = {
    "plan_id": "plan-1",
    "idempotency_key": "key-1",
    "outcome": "applied",
    "resolver_identity": "file",
    "target_identity": "duckdb",
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.json").write_text('{"do not": "touch"}')
    return folder


@pytest.fixture
def closed(store: DlqStore) -> list[str]:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(3))
    writer.close()
    return ids


@pytest.mark.parametrize("bad", ["../run", "..", "/etc/passwd", "/tmp", "a/../../b", "x\\..\\y"])
def test_ids_that_leave_the_store(store: DlqStore, bad: str, closed: list[str]) -> None:
    with pytest.raises(DlqPathEscape) as caught:
        store.open_run(bad, "load-1")
    assert caught.value.code == "DPONE_DLQ_PATH_ESCAPE"
    with pytest.raises(DlqPathEscape):
        store.open_run("run-9", bad)
    with pytest.raises(DlqPathEscape):
        store.read_record("run-1", bad)
    with pytest.raises(DlqPathEscape):
        store.read_index(bad)
    with pytest.raises(DlqPathEscape):
        store.write_ack(bad, closed[0], ACK)
    with pytest.raises(DlqPathEscape):
        verify_store(store, bad)
    assert bad not in str(caught.value)


def test_symlinked_run_folder(store: DlqStore, root: Path, outside: Path) -> None:
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "run-x").symlink_to(outside)
    for call in (
        lambda: store.read_index("run-x"),
        lambda: store.open_run("run-x", "load-1"),
        lambda: store.read_record("run-x", "01KJK000000000000000000000"),
    ):
        with pytest.raises(DlqPathEscape):
            call()
    assert [f.code for f in verify_store(store)] == ["DPONE_DLQ_PATH_ESCAPE"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]


def test_symlinked_segment_file(
    store: DlqStore, root: Path, outside: Path, closed: list[str]
) -> None:
    [segment] = segment_files(root, "run-1")
    segment.unlink()
    segment.symlink_to(outside / "secret.json")
    with pytest.raises(DlqPathEscape):
        store.read_record("run-1", closed[0])
    with pytest.raises(DlqPathEscape):
        list(store.iter_records("run-1"))
    [finding] = verify_store(store)
    assert (finding.code, finding.path) == (
        "DPONE_DLQ_PATH_ESCAPE",
        f"runs/run-1/segments/{segment.name}",
    )
    assert repair_store(store) == []
    assert segment.is_symlink()
    assert (outside / "secret.json").read_text() == '{"do not": "touch"}'


def test_planted_symlink_where_a_segment_will_be_published(
    store: DlqStore, root: Path, outside: Path
) -> None:
    writer = store.open_run("run-1", "load-1")
    [first] = writer.write_chunk(rows(1))
    planted = segments_dir(root, "run-1") / "00000002.jsonl"  # the next segment's name
    planted.symlink_to(outside / "secret.json")
    with pytest.raises(DlqPathEscape):
        writer.write_chunk(rows(1, start=2))
    assert (outside / "secret.json").read_text() == '{"do not": "touch"}'
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]
    assert temp_files(root, "run-1") == []
    assert writer.abort().record_ids == (first,)


@pytest.mark.parametrize("target", ["segments", "index.json"])
def test_symlinked_parts_of_a_run(
    store: DlqStore, root: Path, outside: Path, closed: list[str], target: str
) -> None:
    path = root / "runs" / "run-1" / target
    moved = outside / f"moved-{target}"
    os.rename(path, moved)
    path.symlink_to(moved)
    assert "DPONE_DLQ_PATH_ESCAPE" in {f.code for f in verify_store(store)}
    with pytest.raises(DlqPathEscape):
        list(store.iter_records("run-1"))


def test_symlinked_runs_and_acks_folders(
    store: DlqStore, root: Path, outside: Path, closed: list[str]
) -> None:
    os.rename(root / "runs", outside / "runs")
    (root / "runs").symlink_to(outside / "runs")
    (root / "acks").symlink_to(outside)
    assert sorted(f.code for f in verify_store(store)) == ["DPONE_DLQ_PATH_ESCAPE"] * 2
    with pytest.raises(DlqPathEscape):
        store.open_run("run-2", "load-1")
    with pytest.raises(DlqPathEscape):
        store.read_index("run-1")


def test_symlinked_ack_folder_refuses_writes(
    store: DlqStore, root: Path, outside: Path, closed: list[str]
) -> None:
    (root / "acks").mkdir()
    (root / "acks" / "run-1").symlink_to(outside)
    sha = store.read_record("run-1", closed[0]).sha256
    with pytest.raises(DlqPathEscape):
        store.write_ack("run-1", closed[0], {**ACK, "record_sha256": sha})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]
    assert [f.code for f in verify_store(store)] == ["DPONE_DLQ_PATH_ESCAPE"]


def test_a_store_root_that_is_a_symlink_is_allowed(tmp_path: Path, clock: object) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    store = DlqStore(tmp_path / "link", clock=clock)  # type: ignore[arg-type]
    with store.open_run("run-1", "load-1") as writer:
        writer.write_chunk(rows(1))
    assert verify_store(store) == []
