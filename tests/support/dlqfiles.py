"""The dead-letter store's files, read independently of dpone (the layout of SPEC §5).

Tests use these to see what reached the disk without going through the store's own readers::

    runs/<run_id>/segments/<name>.jsonl      one sealed dpone.dlq.v1 record per line
    acks/<run_id>/<replay_id>-<seq>.jsonl    one dpone.dlq-replay-ack.v1 per line
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def segments_dir(root: Path, run_id: str) -> Path:
    return root / "runs" / run_id / "segments"


def segment_files(root: Path, run_id: str) -> list[Path]:
    """The published segments of a run, in name order (temporary files left out)."""
    return sorted(
        p for p in segments_dir(root, run_id).glob("*.jsonl") if not p.name.startswith(".")
    )


def temp_files(root: Path, run_id: str) -> list[Path]:
    """Temporary files of segment publishes that did not finish."""
    return sorted(p for p in segments_dir(root, run_id).glob(".*") if ".tmp-" in p.name)


def lines_of(path: Path) -> list[bytes]:
    """The lines of a JSON-lines file, each without its newline (the last one must have it)."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), path
    return data[:-1].split(b"\n")


def records_on_disk(root: Path, run_id: str) -> list[dict[str, Any]]:
    """Every record line of every segment of a run, in segment then line order."""
    return [json.loads(line) for path in segment_files(root, run_id) for line in lines_of(path)]


def record_ids_on_disk(root: Path, run_id: str) -> list[str]:
    """The record ids of every line of every segment, sorted (a duplicate shows twice)."""
    return sorted(doc["record_id"] for doc in records_on_disk(root, run_id))


def locate(root: Path, run_id: str, record_id: str) -> tuple[Path, int]:
    """The segment that holds ``record_id`` and its 1-based line number."""
    for path in segment_files(root, run_id):
        for number, line in enumerate(lines_of(path), start=1):
            if json.loads(line)["record_id"] == record_id:
                return path, number
    raise AssertionError(f"record {record_id} is in no segment of run {run_id}")


def rewrite_line(path: Path, number: int, line: bytes | None) -> None:
    """Replace line ``number`` (1-based) of a segment, or remove it when ``line`` is None."""
    lines = lines_of(path)
    if line is None:
        del lines[number - 1]
    else:
        lines[number - 1] = line
    path.write_bytes(b"".join(item + b"\n" for item in lines))


def ack_files(root: Path, run_id: str) -> list[Path]:
    """The acknowledgement segments of a run, in name order."""
    return sorted((root / "acks" / run_id).glob("*.jsonl"))


def acks_on_disk(root: Path, run_id: str) -> list[dict[str, Any]]:
    """Every acknowledgement line of a run, in file then line order."""
    return [json.loads(line) for path in ack_files(root, run_id) for line in lines_of(path)]


def acked_ids(root: Path, run_id: str) -> list[str]:
    """The record ids acknowledged on disk, sorted (a duplicate shows twice)."""
    return sorted(doc["record_id"] for doc in acks_on_disk(root, run_id))


__all__ = [
    "ack_files",
    "acked_ids",
    "acks_on_disk",
    "lines_of",
    "locate",
    "record_ids_on_disk",
    "records_on_disk",
    "rewrite_line",
    "segment_files",
    "segments_dir",
    "temp_files",
]


def reseal_index(root: Path, run_id: str) -> dict[str, Any]:
    """The forger's last step: rebuild a run's index from the segments it lists as they are on
    disk now (checksums, counts, fingerprint), with no key. Returns the new index document."""
    from dpone.dlq.index import build_index_doc, entry
    from dpone.dlq.segments import SegmentEntry, bytes_checksum

    index_path = root / "runs" / run_id / "index.json"
    doc = json.loads(index_path.read_bytes())
    entries: list[dict[str, Any]] = []
    segments = []
    for listed in doc["segments"]:
        path = segments_dir(root, run_id) / listed["name"]
        data = path.read_bytes()
        records = [json.loads(line) for line in data.splitlines()]
        entries += [
            entry(r["record_id"], r["sha256"], r["reason"]["code"], r["reason"].get("column"))
            for r in records
        ]
        segments.append(
            SegmentEntry(
                listed["name"],
                bytes_checksum(data),
                len(records),
                records[0]["record_id"],
                records[-1]["record_id"],
                listed["expires_at"],
            )
        )
    forged = build_index_doc(
        run_id=doc["run_id"],
        load_id=doc["load_id"],
        pipeline=doc["pipeline"],
        status=doc["status"],
        status_reason=doc["status_reason"],
        pii_policy=doc["pii_policy"],
        retention_days=doc["retention_days"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        owner_pid=None,
        entries=entries,
        segments=segments,
    )
    index_path.chmod(0o644)
    index_path.write_bytes(json.dumps(forged, sort_keys=True).encode())
    return forged


def reseal_ref(root: Path, run_id: str, new_path: str) -> None:
    """A forger's rewrite: point the run's first record at ``new_path`` (as a ref spells it),
    then reseal the record's checksum and the index, so the store verifies again."""
    import orjson

    from dpone.canonical import checksum

    segment = segment_files(root, run_id)[0]
    lines = segment.read_bytes().splitlines()
    doc = orjson.loads(lines[0])
    old_ref = doc["record_ref"]
    doc["record_ref"] = "dpone://file/" + new_path + old_ref[old_ref.index("?") :]
    del doc["sha256"]
    doc["sha256"] = checksum(doc)
    lines[0] = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    reseal_index(root, run_id)
