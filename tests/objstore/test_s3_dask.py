"""The Dask engine over S3 objects (SPEC §12): each object (a Parquet object's row groups) is a
partition read by a worker process, with the credentials only in the run's environment (the
standard AWS variables, handed to the tasks), and the run ends as the local engine's does."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.s3pipeline import ENDPOINT_VARIABLE, S3Pipeline
from tests.support.scaleout import outcome, same_result, write_manifest

STORAGE = {"endpoint_url": "${" + ENDPOINT_VARIABLE + "}"}


def _both(s3p: S3Pipeline, path: str, fmt: str, cluster: dict[str, Any]) -> dict[str, Any]:
    """The local run and the Dask run of the same objects; the Dask run's outcome."""
    source = {"type": "file", "format": fmt, "path": s3p.uri(path), "options": {"storage": STORAGE}}
    env = s3p.standard_env()
    local = outcome(write_manifest(s3p.root, f"{fmt}_local", "local", source), env)
    dask = outcome(write_manifest(s3p.root, f"{fmt}_dask", "dask", source, **cluster), env)
    same_result(local, dask)
    return dask


def test_csv_objects_are_partitions_of_a_dask_run(
    s3p: S3Pipeline, local_cluster: dict[str, Any]
) -> None:
    for f in range(3):
        lines = ["id,amount,kind"] + [
            f"{f * 1000 + i},{'n/a' if i % 7 == 0 else f'{i}.25'},k{i % 3}" for i in range(50)
        ]
        s3p.put(f"landing/part{f}.csv", ("\n".join(lines) + "\n").encode())

    dask = _both(s3p, "landing/*.csv", "csv", local_cluster)

    parts = dask["scale_out"]["partitions"]
    assert [(p["source_partition"], p["rows_read"]) for p in parts] == [
        (s3p.uri(f"landing/part{f}.csv"), 50) for f in range(3)
    ]
    assert dask["report"]["rows"]["quarantined"] == 3 * 8
    assert all(ref.startswith(f"dpone://file/s3://{s3p.bucket}/") for ref, _ in dask["records"])
    assert s3p.server.secret not in str(dask["evidence_doc"])


def test_parquet_row_groups_of_an_object_are_partitions(
    s3p: S3Pipeline, local_cluster: dict[str, Any]
) -> None:
    n = 5000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "amount": [f"{i}.5" if i % 61 else "bad" for i in range(n)],
            "kind": [f"k{i % 4}" for i in range(n)],
        }
    )
    body = io.BytesIO()
    pq.write_table(table, body, row_group_size=1000)
    s3p.put("lake/big.parquet", body.getvalue())

    dask = _both(s3p, "lake/big.parquet", "parquet", local_cluster)

    # 5 row groups of 1000 rows, taken together up to 4 chunks of 500 rows: 3 partitions
    segments = {p.name[:6] for p in Path(dask["work"], "dlq", "runs").glob("*/segments/*.jsonl")}
    assert segments == {f"p{i:05d}" for i in range(3)}
    assert dask["report"]["rows"]["quarantined"] == len(range(0, n, 61))
