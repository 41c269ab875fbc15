"""File sources over S3: ``path: s3://bucket/prefix/*.csv`` read from a
local S3-compatible server (moto, tests/support/s3server.py) into DuckDB, with the credentials
from the standard AWS variables or ``${ENV}`` references, and every failure a stable DPONE_*
code that names no secret."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpone.connectors import make_source
from dpone.connectors.errors import SourceConfigError, SourceObjectChanged
from dpone.connectors.objectstore import ObjectFile, object_filesystem
from dpone.connectors.sources.file import FileSource
from dpone.manifest.secrets import SecretRef
from dpone.manifest.specs import STORAGE_TEXT_KEYS, StorageOptions
from dpone.published import schema_errors
from tests.connectors.specs import source_spec
from tests.support.replay_pipeline import CANARY, FIRST_LOAD, ROWS
from tests.support.s3pipeline import ENDPOINT_VARIABLE, S3Pipeline, csv_bytes
from tests.support.s3server import REGION


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_csv_glob_over_s3_loads_and_quarantines_with_the_object_uri_and_sha256(
    s3p: S3Pipeline,
) -> None:
    # Written out of order; a sibling folder, another extension and another prefix that the
    # glob must not match.
    late = csv_bytes(ROWS[3:])
    early = csv_bytes(ROWS[:3])
    s3p.put("landing/2026-02.csv", late)
    s3p.put("landing/2026-01.csv", early)
    s3p.put("landing/notes.txt", b"not,a,csv\n")
    s3p.put("landing/sub/2026-03.csv", csv_bytes((("7", "g", "1.00"),)))
    s3p.put("landing-old/2025-12.csv", csv_bytes((("8", "h", "1.00"),)))
    s3p.write_manifest()

    result = s3p.run()

    assert result.exit_code == 0, result.stdout + result.stderr
    doc = result.doc
    assert doc["data_outcome"] == "passed_with_quarantine"
    assert s3p.amounts() == FIRST_LOAD
    records = s3p.records(doc["dlq"]["run_id"])
    by_row = {
        (r["diagnostics"]["source_partition"], r["record_ref"].rsplit("=", 1)[1]): r
        for r in records
    }
    jan, feb = s3p.uri("landing/2026-01.csv"), s3p.uri("landing/2026-02.csv")
    # Row 2 of January (12.345) and rows 1 and 2 of February (1.999, not a number).
    assert sorted(by_row) == [(jan, "2"), (feb, "1"), (feb, "2")]
    ref = by_row[(jan, "2")]["record_ref"]
    assert ref == f"dpone://file/{jan}?sha256={_sha(early)}&row=2"
    assert by_row[(feb, "1")]["record_ref"] == f"dpone://file/{feb}?sha256={_sha(late)}&row=1"
    for record in records:
        assert schema_errors(record, "dpone.dlq.v1") == []
        assert record["replay"]["replayable"] is True
    evidence = json.loads((s3p.root / doc["evidence"]).read_text())
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    # No secret and no row value in anything the run printed or wrote.
    printed = result.stdout + result.stderr
    assert s3p.server.secret not in printed
    assert CANARY not in printed
    for path in (s3p.root / ".dpone").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".md"):
            text = path.read_text(encoding="utf-8")
            assert s3p.server.secret not in text, path
            assert CANARY not in text, path


def test_objects_are_listed_in_sorted_key_order_with_globs_in_folders(
    s3p: S3Pipeline, tmp_path: Path
) -> None:
    for key in ("in/b/2.csv", "in/a/9.csv", "in/a/10.csv", "in/c/deep/1.csv", "in/.hidden/1.csv"):
        s3p.put(key, b"id\n1\n")
    one_level = _source(s3p, "in/*/*.csv", tmp_path)
    assert [p for p, _ in one_level.files()] == [
        s3p.uri("in/a/10.csv"),
        s3p.uri("in/a/9.csv"),
        s3p.uri("in/b/2.csv"),
    ]
    any_depth = _source(s3p, "in/**/*.csv", tmp_path)
    assert [p for p, _ in any_depth.files()] == [
        s3p.uri("in/a/10.csv"),
        s3p.uri("in/a/9.csv"),
        s3p.uri("in/b/2.csv"),
        s3p.uri("in/c/deep/1.csv"),
    ]
    assert [p for p, _ in _source(s3p, "in/b/2.csv", tmp_path).files()] == [s3p.uri("in/b/2.csv")]


def _source(s3p: S3Pipeline, key_glob: str, base: Path, fmt: str = "csv") -> FileSource:
    spec = source_spec({"type": "file", "format": fmt, "path": s3p.uri(key_glob)}, base)
    source = make_source(spec, env=s3p.standard_env(), read_all_as_text=fmt != "parquet")
    assert isinstance(source, FileSource)
    return source


def test_parquet_and_gzipped_jsonl_load_from_s3(s3p: S3Pipeline) -> None:
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", "c"],
            "amount": pa.array([Decimal("1.50"), Decimal("2.25"), Decimal("3.00")]).cast(
                pa.decimal128(12, 2)
            ),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2)
    s3p.put("parquet/part-0.parquet", sink.getvalue())
    s3p.write_manifest(path="parquet/*.parquet", fmt="parquet")
    first = s3p.run()
    assert first.exit_code == 0, first.stdout + first.stderr
    assert s3p.amounts() == {1: Decimal("1.50"), 2: Decimal("2.25"), 3: Decimal("3.00")}

    lines = [
        {"id": 4, "name": "d", "amount": "4.10"},
        {"id": 5, "name": "e", "amount": "not a number"},
        {"id": 6, "name": "f", "amount": 6.2},
    ]
    body = gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    s3p.put("jsonl/events.jsonl.gz", body)
    s3p.write_manifest(path="jsonl/*.jsonl.gz", fmt="jsonl")
    second = s3p.run()
    assert second.exit_code == 0, second.stdout + second.stderr
    assert {4, 6} <= set(s3p.amounts())
    (record,) = s3p.records(second.doc["dlq"]["run_id"])
    # The ref's SHA-256 is the object's stored (compressed) bytes, as for a local .gz file.
    uri = s3p.uri("jsonl/events.jsonl.gz")
    assert record["record_ref"] == f"dpone://file/{uri}?sha256={_sha(body)}&row=2"


def test_credentials_from_env_references_in_options_storage(s3p: S3Pipeline) -> None:
    s3p.put("landing/a.csv", csv_bytes(ROWS[:1]))
    s3p.write_manifest(
        storage={
            "endpoint_url": "${S3_AT}",
            "region": REGION,
            "key": "${ORDERS_S3_KEY}",
            "secret": "${ORDERS_S3_SECRET}",
        }
    )
    # No AWS_* variable at all: only the manifest's references name the credentials.
    env = {
        "S3_AT": s3p.server.endpoint,
        "ORDERS_S3_KEY": s3p.server.key,
        "ORDERS_S3_SECRET": s3p.server.secret,
    }
    result = s3p.run(env=env)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert s3p.amounts() == {1: Decimal("10.50")}
    assert s3p.server.secret not in result.stdout + result.stderr
    plan = s3p.cli("plan", str(s3p.manifest), "--format", "json", env=env)
    assert plan.exit_code == 0, plan.stdout
    assert set(json.loads(plan.stdout)["secrets"]) == {"S3_AT", "ORDERS_S3_KEY", "ORDERS_S3_SECRET"}
    assert s3p.server.secret not in plan.stdout

    unset = s3p.run(env={"S3_AT": s3p.server.endpoint})
    assert unset.exit_code == 2
    # Refused in preflight, before the run (and its report) begins: the error document.
    assert unset.doc["code"] == "DPONE_SECRET_UNRESOLVED"
    # Every unset variable at once, not the first setting's only.
    assert "ORDERS_S3_KEY, ORDERS_S3_SECRET" in unset.doc["message"]


def test_the_standard_endpoint_variable_is_enough(s3p: S3Pipeline) -> None:
    s3p.put("landing/a.csv", csv_bytes(ROWS[:1]))
    s3p.write_manifest(storage={})  # AWS_ENDPOINT_URL, AWS_REGION and the keys from the env
    result = s3p.run(env=s3p.server.env())
    assert result.exit_code == 0, result.stdout + result.stderr
    assert s3p.amounts() == {1: Decimal("10.50")}


@pytest.mark.parametrize("wrong", ["secret", "key"])
def test_wrong_credentials_are_a_clear_error_without_the_secret(
    s3p: S3Pipeline, wrong: str
) -> None:
    s3p.put("landing/a.csv", csv_bytes())
    s3p.write_manifest()
    bad_secret = "wrongSECRETvalue0123456789abcdefABCDEF"
    env = s3p.standard_env()
    if wrong == "secret":
        env["AWS_SECRET_ACCESS_KEY"] = bad_secret
    else:
        env["AWS_ACCESS_KEY_ID"] = "AKIAUNKNOWN000000000"
        env["AWS_SECRET_ACCESS_KEY"] = bad_secret

    result = s3p.run(env=env)

    assert result.exit_code == 2, result.stdout + result.stderr
    error = result.doc["error"]
    assert error["code"] == "DPONE_SOURCE_ACCESS_DENIED"
    assert s3p.bucket in error["message"]
    printed = result.stdout + result.stderr
    for secret in (bad_secret, s3p.server.secret):
        assert secret not in printed
    assert "Traceback" not in printed
    assert not (s3p.root / "warehouse.duckdb").exists() or not s3p.sql(
        "SELECT * FROM information_schema.tables WHERE table_name = 'orders'"
    )


def test_a_missing_bucket_and_a_glob_matching_nothing_are_clear_errors(s3p: S3Pipeline) -> None:
    s3p.put("landing/a.csv", csv_bytes())
    s3p.write_manifest(path="s3://no-such-bucket-dpone/landing/*.csv")
    missing = s3p.run()
    assert missing.exit_code == 2, missing.stdout + missing.stderr
    assert missing.doc["error"]["code"] == "DPONE_SOURCE_BUCKET_NOT_FOUND"
    assert "no-such-bucket-dpone" in missing.doc["error"]["message"]

    for glob in ("landing/*.parquet", "elsewhere/*.csv"):
        s3p.write_manifest(path=glob)
        nothing = s3p.run()
        assert nothing.exit_code == 2, nothing.stdout + nothing.stderr
        assert nothing.doc["error"]["code"] == "DPONE_SOURCE_NO_FILES"
        assert s3p.uri(glob) in nothing.doc["error"]["message"]


def test_an_unreachable_endpoint_is_a_retryable_error(s3p: S3Pipeline) -> None:
    s3p.put("landing/a.csv", csv_bytes())
    s3p.write_manifest()
    env = s3p.standard_env()
    # A closed port on this machine: the connection is refused at once.
    env[ENDPOINT_VARIABLE] = "http://127.0.0.1:9"
    result = s3p.run(env=env)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert result.doc["error"]["code"] == "DPONE_SOURCE_UNAVAILABLE"
    assert s3p.server.secret not in result.stdout + result.stderr


def storage_options(settings: dict[str, object]) -> StorageOptions:
    """``options.storage`` as a spec built by hand: the compiler's checks do not stand in
    front of the connector's own."""
    texts = {k: SecretRef(str(settings[k])) if k in settings else None for k in STORAGE_TEXT_KEYS}
    return StorageOptions(**texts, anonymous=settings.get("anonymous") is True)


def _object(s3p: S3Pipeline, key: str) -> ObjectFile:
    storage = storage_options({"endpoint_url": s3p.server.endpoint})
    return ObjectFile(object_filesystem(s3p.uri(key), storage, s3p.server.env()), s3p.uri(key))


def test_an_object_overwritten_between_its_hash_and_its_read_is_refused(s3p: S3Pipeline) -> None:
    s3p.put("landing/a.csv", csv_bytes())
    csv = _object(s3p, "landing/a.csv")
    digest = csv.sha256()
    assert digest == _sha(csv_bytes())
    s3p.put("landing/a.csv", csv_bytes(ROWS[:2]))  # another writer replaces the object
    with csv.open_stream() as stream:
        while stream.read(1 << 16):
            pass
    with pytest.raises(SourceObjectChanged) as info:
        csv.verify(digest)
    assert info.value.code == "DPONE_SOURCE_OBJECT_CHANGED"

    unchanged = _object(s3p, "landing/a.csv")
    digest = unchanged.sha256()
    with unchanged.open_stream() as stream:
        while stream.read(1 << 16):
            pass
    unchanged.verify(digest)  # the bytes read are the bytes hashed

    table = pa.table({"id": list(range(100))})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    s3p.put("landing/p.parquet", sink.getvalue())
    parquet = _object(s3p, "landing/p.parquet")
    digest = parquet.sha256()
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(50))}), sink)
    s3p.put("landing/p.parquet", sink.getvalue())
    with parquet.open_random() as source:
        assert pq.ParquetFile(source).metadata.num_rows == 50
    with pytest.raises(SourceObjectChanged):
        parquet.verify(digest)


_STREAM_PROBE = """
import json, os, sys, tracemalloc
import pyarrow as pa
from dpone.connectors import make_source
from dpone.manifest.compiler import compile_text

manifest = {"name": "probe", "source": {"type": "file", "format": "csv", "path": sys.argv[1]},
            "sink": {"type": "filesystem", "path": "lake", "table": "t"}}
plan = compile_text(json.dumps(manifest))
source = make_source(plan.source.spec, env=os.environ, read_all_as_text=True)
baseline = pa.total_allocated_bytes()
peak_arrow = rows = 0
tracemalloc.start()
digests = set()
for chunk in source.chunks(10_000):
    rows += chunk.num_rows
    digests.add(chunk.file_sha256)
    peak_arrow = max(peak_arrow, pa.total_allocated_bytes() - baseline)
    del chunk
_, peak_python = tracemalloc.get_traced_memory()
print(json.dumps({"rows": rows, "arrow": peak_arrow, "python": peak_python,
                  "digests": sorted(digests)}))
"""


@pytest.mark.slow
def test_an_object_streams_through_in_chunks(s3p: S3Pipeline) -> None:
    """A ~24 MB object is hashed and parsed as streams: the reading process (one of its own,
    the server lives in this one) never holds more than a few MiB of it."""
    row = "{},2026-01-01T00:00:00Z,some text that pads the row to a realistic width,12.34\n"
    block = "".join(row.format(i) for i in range(10_000)).encode()
    copies = 24 * 1024 * 1024 // len(block)
    body = b"id,ts,note,amount\n" + block * copies
    s3p.put("big/big.csv", body)
    digest = _sha(body)
    del body
    env = {**os.environ, **s3p.server.env()}
    proc = subprocess.run(
        [sys.executable, "-c", _STREAM_PROBE, s3p.uri("big/*.csv")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["rows"] == 10_000 * copies
    assert seen["digests"] == [digest]
    assert seen["arrow"] < 12 * 1024 * 1024, seen
    assert seen["python"] < 12 * 1024 * 1024, seen


def _s3_settings(storage: dict[str, object], env: dict[str, str]) -> dict[str, object]:
    """What the S3 filesystem was built with (pyarrow pickles its settings)."""
    fs = object_filesystem("s3://bucket/a.csv", storage_options(storage), env)
    settings: dict[str, object] = fs.__reduce__()[1][0]
    return settings


def test_storage_options_win_over_the_standard_variables() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "env-key",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
        "AWS_ENDPOINT_URL": "https://s3.example.test",
        "AWS_REGION": "eu-west-1",
        "MINE": "mine-secret",
    }
    from_env = _s3_settings({}, env)
    assert (from_env["access_key"], from_env["secret_key"]) == ("env-key", "env-secret")
    assert (from_env["scheme"], from_env["endpoint_override"]) == ("https", "s3.example.test")
    assert from_env["region"] == "eu-west-1"

    own = _s3_settings(
        {"key": "${MINE}", "secret": "${MINE}", "endpoint_url": "http://127.0.0.1:9000"}, env
    )
    assert (own["access_key"], own["secret_key"]) == ("mine-secret", "mine-secret")
    assert (own["scheme"], own["endpoint_override"]) == ("http", "127.0.0.1:9000")

    anonymous = _s3_settings({"anonymous": True}, env)
    assert anonymous["anonymous"] is True
    assert anonymous["access_key"] is None


@pytest.mark.parametrize(
    ("storage", "env"),
    [
        ({"endpoint_url": "http://127.0.0.1:9000/path"}, {}),
        ({"endpoint_url": "ftp://127.0.0.1"}, {}),
        ({"key": "${K}"}, {"K": "only-a-key"}),
        ({"account_name": "acct"}, {}),
    ],
)
def test_unusable_storage_settings_are_config_errors(
    storage: dict[str, object], env: dict[str, str]
) -> None:
    with pytest.raises(SourceConfigError) as info:
        object_filesystem("s3://bucket/a.csv", storage_options(storage), env)
    assert info.value.exit_code == 2
    assert "only-a-key" not in str(info.value)
