"""Helpers of the scale-out tests: one folder, two manifests (engine local and engine dask) over
the same data, and what each run left: loaded rows, DLQ records, evidence counts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import yaml

from dpone import api


def write_manifest(
    folder: Path, name: str, engine: str, source: dict[str, Any], **runtime: Any
) -> Path:
    doc = {
        "name": name,
        "runtime": {"engine": engine, "chunk_size": 500, "work_dir": f".{name}", **runtime},
        "source": source,
        "sink": {
            "type": "duckdb",
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "amount": {"type": "decimal", "precision": 18, "scale": 2},
                        "kind": {"type": "string"},
                    },
                },
            },
        },
        "quality": {"assertions": {"min_rows_per_load": 1}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


_RUN_ROW = re.compile(r"/rows/([0-9]+)$")


def outcome(manifest: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``manifest``; what it loaded, dead-lettered and put in its evidence."""
    report = api.run(manifest, env=env).to_json()
    folder = manifest.parent
    work = folder / f".{manifest.stem}"
    con = duckdb.connect(str(work / f"{manifest.stem}.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT id, amount, kind FROM dpone.t ORDER BY id").fetchall()
    finally:
        con.close()
    run_id = report["run_id"]
    run_dir = work / "dlq" / "runs" / run_id
    index = json.loads((run_dir / "index.json").read_text())
    records = []
    for segment in sorted((run_dir / "segments").glob("*.jsonl")):
        for line in segment.read_bytes().splitlines():
            doc = json.loads(line)
            ref = doc["record_ref"]
            # run-scoped refs name their run: compare them by the row number they carry
            found = _RUN_ROW.search(ref) if ref.startswith("dpone://runs/") else None
            records.append((found.group(1) if found else ref, doc["reason"]["code"]))
    evidence = json.loads((folder / report["evidence"]).read_text())
    return {
        "report": report,
        "rows": rows,
        "records": sorted(records),
        "index_status": index["status"],
        "index_count": index["record_count"],
        "evidence": {
            "summary": {k: v for k, v in evidence["summary"].items() if k != "chunks"},
            "violations": evidence["violations"],
            "dlq": {k: evidence["dlq"][k] for k in ("record_count", "reasons", "run_status")},
            "assertions": evidence["assertions"],
        },
        "work": work,
        "scale_out": evidence.get("scale_out"),
        "evidence_doc": evidence,
    }


def same_result(local: dict[str, Any], dask: dict[str, Any]) -> None:
    assert dask["rows"] == local["rows"]
    assert dask["records"] == local["records"]
    assert dask["index_status"] == local["index_status"] == "closed"
    assert dask["index_count"] == local["index_count"] == len(local["records"])
    assert dask["evidence"] == local["evidence"]
