"""``dpone validate`` of object store paths and ``options.storage``: s3://, gs:// and az://
are accepted (gs:// and az:// are tested at this level only: no GCS or Azure server runs
here), and what a run would refuse is refused first, with line and column, without
touching the network or the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.manifest.helpers import BASE
from tests.support.processes import CliRun


def _validate(tmp_path: Path, path: str, storage: str | None = None) -> CliRun:
    text = BASE.replace("path: data/*.csv", f"path: {json.dumps(path)}")
    if storage is not None:
        text = text.replace(
            f"path: {json.dumps(path)}\n",
            f"path: {json.dumps(path)}\n  options:\n    storage: {storage}\n",
        )
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(text, encoding="utf-8")
    # No variable at all: validating never resolves a reference nor reads a credential.
    result = CliRunner().invoke(cli, ["validate", str(manifest), "--format", "json"], env={})
    return CliRun(result.exit_code, result.stdout, result.stderr)


def _errors(run: CliRun) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = run.doc["manifests"][0]["errors"]
    return errors


@pytest.mark.parametrize(
    ("path", "storage"),
    [
        ("s3://landing-bucket/orders/*.csv", None),
        ("s3://landing.bucket/2026-*/orders-??.csv", '{endpoint_url: "${S3_URL}", region: x}'),
        ("s3://landing-bucket/**/*.csv", '{key: "${K}", secret: "${S}", token: "${T}"}'),
        ("s3://public-data/a.csv", "{anonymous: true}"),
        ("gs://landing_bucket/orders/*.csv", '{project_id: p1, endpoint_url: "${GCS_URL}"}'),
        ("gs://landing-bucket/orders/*.csv", "{anonymous: true}"),
        ("az://landing/orders/*.csv", '{account_name: acct, account_key: "${AZ_KEY}"}'),
        ("az://landing/orders/*.csv", '{account_name: "${AZ_ACCT}", sas_token: "${AZ_SAS}"}'),
    ],
)
def test_object_store_paths_and_storage_options_validate(
    tmp_path: Path, path: str, storage: str | None
) -> None:
    result = _validate(tmp_path, path, storage)
    assert result.exit_code == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "path",
    [
        "s3://Bucket/a.csv",  # upper case
        "s3://b*/a.csv",  # a glob in the bucket
        "s3://ab/a.csv",  # too short
        "s3://bucket",  # no key
        "s3://bucket/",  # a folder
        "s3://bucket/landing/",  # a folder
        "s3://bucket/landing/../secret.csv",  # no climbing in a key
        "s3://bucket/landing//a.csv",  # an empty segment is another key
        "s3://bucket/./a.csv",
        "s3://bucket/landing/**",
        "ftp://bucket/a.csv",  # not a store dpone reads
        "https://example.com/a.csv",
    ],
)
def test_unusable_object_uris_are_source_path_errors(tmp_path: Path, path: str) -> None:
    result = _validate(tmp_path, path)
    assert result.exit_code == 2, result.stdout
    (error,) = _errors(result)
    assert error["code"] == "DPONE_MANIFEST_SOURCE_PATH"
    assert error["pointer"] == "/source/path"
    assert error["line"] == 5


@pytest.mark.parametrize(
    ("path", "storage", "code", "pointer"),
    [
        ("s3://bkt/a.csv", "{account_name: x}", "DPONE_MANIFEST_SOURCE_OPTION", "account_name"),
        ("gs://bkt/a.csv", "{region: eu}", "DPONE_MANIFEST_SOURCE_OPTION", "region"),
        ("az://ctr/a.csv", "{anonymous: true}", "DPONE_MANIFEST_SOURCE_OPTION", "anonymous"),
        ("s3://bkt/a.csv", "{secret: hunter2hunter2}", "DPONE_MANIFEST_INLINE_SECRET", "secret"),
        ("s3://bkt/a.csv", '{key: "AKIA${SUFFIX}"}', "DPONE_MANIFEST_INLINE_SECRET", "key"),
        ("az://ctr/a.csv", "{account_key: abc}", "DPONE_MANIFEST_INLINE_SECRET", "account_key"),
        (
            "s3://bkt/a.csv",
            '{secret: "${NOT-A-NAME}"}',
            "DPONE_MANIFEST_SECRET_REFERENCE",
            "secret",
        ),
        (
            "s3://bkt/a.csv",
            '{endpoint_url: "${X"}',
            "DPONE_MANIFEST_SECRET_REFERENCE",
            "endpoint_url",
        ),
        ("data/*.csv", "{region: eu}", "DPONE_MANIFEST_SOURCE_OPTION", ""),
    ],
)
def test_storage_options_are_checked_where_they_are_written(
    tmp_path: Path, path: str, storage: str, code: str, pointer: str
) -> None:
    result = _validate(tmp_path, path, storage)
    assert result.exit_code == 2, result.stdout
    errors = _errors(result)
    assert [e["code"] for e in errors] == [code], errors
    expected = "/source/options/storage" + (f"/{pointer}" if pointer else "")
    assert errors[0]["pointer"] == expected
    assert errors[0]["line"] == 7
    assert "hunter2" not in result.stdout + result.stderr


def test_an_unknown_storage_key_is_a_schema_error(tmp_path: Path) -> None:
    result = _validate(tmp_path, "s3://bkt/a.csv", "{endpoint: http://x}")
    assert result.exit_code == 2
    (error,) = _errors(result)
    assert error["code"] == "DPONE_MANIFEST_UNKNOWN_KEY"
    assert error["pointer"] == "/source/options/storage/endpoint"


def test_the_api_checks_storage_references_in_the_given_environment(tmp_path: Path) -> None:
    import dpone
    from dpone.errors import SecretError

    text = BASE.replace(
        "path: data/*.csv",
        'path: s3://bkt/a.csv\n  options:\n    storage: {endpoint_url: "${S3_URL}"}',
    )
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(text, encoding="utf-8")
    with pytest.raises(SecretError) as info:
        dpone.compile(manifest, env={})
    assert "S3_URL" in info.value.message
    plan = dpone.compile(manifest, env={"S3_URL": "http://127.0.0.1:9000"})
    assert plan.secret_names == ("S3_URL",)
    assert "127.0.0.1" not in json.dumps(plan.to_json())
