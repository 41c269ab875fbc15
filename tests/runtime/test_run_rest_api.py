"""``dpone run`` of a rest_api manifest against a local HTTP server, into a DuckDB file: the
contract and the DLQ, the incremental cursor handed to dlt, and secrets kept out of every
output. Outcomes are read back from the server's request log, the DuckDB file, the DLQ
segments and the state file on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from dpone.cli.main import cli
from dpone.published import schema_errors
from tests.connectors.restapi import PAGINATORS, OrdersApi, item, rest_source
from tests.support.project import CANARY

TOKEN = "tok-7d1c55e0a9"
API_KEY = "key-31f0c2b8d4"
COLUMNS = {
    "id": {"type": "integer", "nullable": False},
    "name": {"type": "string"},
    "amount": {"type": "decimal", "precision": 10, "scale": 2, "nullable": False},
    "updated_at": {"type": "timestamp", "timezone": True, "nullable": False},
    "tags": {"type": "json"},
}


class ApiProject:
    def __init__(self, root: Path, source: dict[str, Any], pii_policy: str = "reference_only"):
        self.root = root
        self.manifest = {
            "name": "orders_api",
            "runtime": {"chunk_size": 3},
            "source": source,
            "sink": {
                "type": "duckdb",
                "dataset": "analytics",
                "table": "orders",
                "options": {
                    "schema_contract": {"enforcement": "quarantine", "columns": COLUMNS},
                    "dlq": {"pii_policy": pii_policy},
                },
            },
        }
        # JSON is YAML: the manifest is written as JSON text.
        (root / "manifest.yaml").write_text(json.dumps(self.manifest, indent=2))

    def run(self, **env: str) -> tuple[dict[str, Any], str]:
        result = CliRunner().invoke(
            cli,
            ["run", str(self.root / "manifest.yaml"), "--format", "json"],
            env=env,
            catch_exceptions=False,
        )
        doc: dict[str, Any] = json.loads(result.stdout)
        assert schema_errors(doc, "dpone.run.v1") == []
        assert result.exit_code == doc["exit_code"]
        return doc, result.stdout + result.stderr

    def ids(self) -> list[int]:
        with duckdb.connect(str(self.root / ".dpone" / "orders_api.duckdb"), read_only=True) as con:
            return [r[0] for r in con.sql("SELECT id FROM analytics.orders ORDER BY id").fetchall()]

    def dlq_records(self, run_id: str) -> list[dict[str, Any]]:
        segments = sorted((self.root / ".dpone" / "dlq" / "runs" / run_id).glob("segments/*"))
        return [json.loads(line) for s in segments for line in s.read_text().splitlines()]

    def state(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((self.root / ".dpone/state/orders_api.json").read_text())
        return doc

    def artifacts_text(self) -> str:
        """Every file dpone wrote but the DuckDB file (which holds the loaded rows)."""
        files = [p for p in (self.root / ".dpone").rglob("*") if p.is_file()]
        return "\n".join(
            p.read_text(errors="replace") for p in files if not p.name.startswith("orders_api.")
        )


def test_an_item_that_breaks_the_contract_goes_to_the_dlq(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    bad = item(3, amount=CANARY)
    api = OrdersApi(httpserver, "json_link", [item(1), item(2), bad, item(4)])
    project = ApiProject(tmp_path, rest_source(api.base_url, PAGINATORS["json_link"]))

    report, output = project.run()

    assert report["status"] == "succeeded"
    assert report["data_outcome"] == "passed_with_quarantine"
    assert project.ids() == [1, 2, 4]
    (record,) = project.dlq_records(report["run_id"])
    assert record["reason"]["code"] == "schema.type_mismatch"
    assert record["reason"]["column"] == "amount"
    # API rows cannot be read again: the run/load/row form, row 3 of the load, not replayable.
    assert record["record_ref"] == (
        f"dpone://runs/{report['run_id']}/loads/{report['load_id']}/rows/3"
    )
    assert record["replay"] == {"status": "not_replayable", "replayable": False}
    assert record["diagnostics"]["source_partition"] == "orders"
    assert record["payload"]["value"] is None
    assert CANARY not in output
    assert CANARY not in project.artifacts_text()


def test_preserve_keeps_the_item_in_the_dlq_payload(tmp_path: Path, httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "json_link", [item(1), item(2, amount="12.345")])
    source = rest_source(api.base_url, PAGINATORS["json_link"])
    project = ApiProject(tmp_path, source, pii_policy="preserve")

    report, _ = project.run()

    (record,) = project.dlq_records(report["run_id"])
    assert record["record_ref"].endswith("/rows/2")
    assert record["payload"]["value"]["amount"] == "12.345"
    assert record["payload"]["value"]["tags"] == '["a","2"]'


def test_a_second_run_fetches_only_newer_items(tmp_path: Path, httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "page_number", [item(i) for i in range(1, 6)])
    source = rest_source(
        api.base_url,
        PAGINATORS["page_number"],
        params={"since": "{incremental.start_value}"},
        incremental={"cursor_column": "updated_at", "initial_value": "2026-01-01T10:00:00Z"},
    )
    project = ApiProject(tmp_path, source)

    first, _ = project.run()
    assert first["rows"]["read"] == 4  # item 1 is at the initial value: not newer
    assert project.ids() == [2, 3, 4, 5]
    committed = project.state()["cursor"]["value"]
    assert committed == "2026-01-05T10:00:00.000000Z"
    assert [r["since"] for r in api.requests()] == ["2026-01-01T10:00:00Z"] * 2

    httpserver.clear_log()
    api.items.extend(item(i) for i in range(6, 9))
    second, _ = project.run()

    # The server was asked only for items after the committed cursor (written as the API
    # writes it), and sent only those.
    assert [r["since"] for r in api.requests()] == ["2026-01-05T10:00:00Z"] * 2
    assert [r["page"] for r in api.requests()] == ["1", "2"]
    assert second["rows"]["read"] == 3
    assert second["state"]["from"] == committed
    assert project.ids() == [2, 3, 4, 5, 6, 7, 8]
    assert project.state()["cursor"]["value"] == "2026-01-08T10:00:00.000000Z"


@pytest.mark.parametrize("status", [200, 401])
def test_secrets_never_reach_logs_or_artifacts(
    tmp_path: Path, httpserver: HTTPServer, status: int
) -> None:
    if status != 200:
        httpserver.expect_oneshot_request("/orders").respond_with_data("no", status=status)
    api = OrdersApi(httpserver, "json_link", [item(1), item(2, amount="bad")])
    source = rest_source(
        api.base_url,
        PAGINATORS["json_link"],
        auth={"type": "bearer", "token": "${API_TOKEN}"},
        params={"key": "${API_KEY}"},
    )
    project = ApiProject(tmp_path, source, pii_policy="masked")

    report, output = project.run(API_TOKEN=TOKEN, API_KEY=API_KEY, DPONE_LOG_LEVEL="debug")

    request = httpserver.log[0][0]
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.args["key"] == API_KEY
    if status == 200:
        assert report["status"] == "succeeded"
        assert project.ids() == [1]
    else:
        assert report["exit_code"] == 1
        assert report["error"]["code"] == "DPONE_SOURCE_HTTP_STATUS"
    for secret in (TOKEN, API_KEY):
        assert secret not in output
        assert secret not in project.artifacts_text()
    assert "${API_TOKEN}" in (tmp_path / "manifest.yaml").read_text()


def test_an_unset_variable_is_a_configuration_error(tmp_path: Path, httpserver: HTTPServer) -> None:
    source = rest_source(httpserver.url_for("/"), "json_link", auth={"token": "${API_TOKEN}"})
    ApiProject(tmp_path, source)  # writes the manifest

    result = CliRunner().invoke(
        cli, ["run", str(tmp_path / "manifest.yaml"), "--format", "json"], env={}
    )

    # Refused in preflight, before the run begins: the error document, no run report, no
    # evidence, no request.
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert schema_errors(doc, "dpone.error.v1") == []
    assert doc["code"] == "DPONE_SECRET_UNRESOLVED"
    assert "API_TOKEN" in doc["message"]
    assert not (tmp_path / ".dpone" / "evidence").exists()
    assert httpserver.log == []
    assert "run.start" not in result.stderr  # no run began
