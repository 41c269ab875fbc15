"""Validation of the rest_api and dlt source blocks: dlt's config shape from the JSON Schema,
the static checks, line numbers like every other manifest error, and no dlt import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.manifest.compiler import compile_text
from tests.support.paths import EXAMPLES

HEAD = """\
name: orders_api
source:
  type: rest_api
  client:
    base_url: https://api.example.com/v1/
"""
SINK = """\
sink:
  type: duckdb
  table: orders
"""


def errors(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["validate", str(path), "--format", "json"])
    assert result.exit_code == (2 if '"valid": false' in result.stdout else 0), result.stdout
    found: list[dict[str, Any]] = json.loads(result.stdout)["manifests"][0].get("errors", [])
    return found


def validate(tmp_path: Path, body: str) -> list[tuple[str, int, str]]:
    path = tmp_path / "manifest.yaml"
    # The body continues the source block: its least indented lines are source keys.
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(body), "  ") + SINK)
    return [(e["code"], e["line"], e["pointer"]) for e in errors(path)]


def test_a_valid_block_compiles_with_its_references_listed(tmp_path: Path) -> None:
    text = HEAD + textwrap.indent(
        textwrap.dedent(
            """\
            headers: {X-Tenant: "${TENANT}"}
            auth: {type: bearer, token: "${API_TOKEN}"}
            paginator: {type: json_link, next_url_path: next}
          resource:
            name: orders
            endpoint:
              path: orders
              params: {status: open, since: "{incremental.start_value}", per_page: 100}
              data_selector: items
              response_actions: [{status_code: 404, action: ignore}]
          incremental: {cursor_column: updated_at, initial_value: "2026-01-01T00:00:00Z"}
          http: {request_max_attempts: 3, request_backoff_factor: 0.5}
        """
        ),
        "  ",
    )
    plan = compile_text(text + SINK, path=tmp_path / "manifest.yaml")
    assert plan.source.type == "rest_api"
    assert plan.secret_names == ("TENANT", "API_TOKEN")
    assert plan.to_json()["manifest"]["source"]["client"]["auth"]["token"] == "${API_TOKEN}"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (  # a paginator key of another paginator type
            """\
                paginator: {type: json_link, next_url: next}
              resource: {name: orders}
            """,
            [("DPONE_MANIFEST_UNKNOWN_KEY", 6, "/source/client/paginator/next_url")],
        ),
        (  # an unknown paginator type, as a word and as a mapping
            """\
                paginator: page_numbers
              resource:
                name: orders
                endpoint: {path: orders, paginator: {type: cursors}}
            """,
            [
                ("DPONE_MANIFEST_ENUM", 6, "/source/client/paginator"),
                ("DPONE_MANIFEST_ENUM", 9, "/source/resource/endpoint/paginator/type"),
            ],
        ),
        (  # offset needs its limit; an auth type dlt does not have
            """\
                paginator: {type: offset}
                auth: {type: oauth, token: "${T}"}
              resource: {name: orders}
            """,
            [
                ("DPONE_MANIFEST_MISSING_KEY", 6, "/source/client/paginator"),
                ("DPONE_MANIFEST_ENUM", 7, "/source/client/auth/type"),
            ],
        ),
        (  # an endpoint key dlt does not know, and the resource key of the dlt type
            """\
              resource:
                name: orders
                endpoint: {path: orders, selector: items}
              ref: mod:orders
            """,
            [
                ("DPONE_MANIFEST_UNKNOWN_KEY", 8, "/source/resource/endpoint/selector"),
                ("DPONE_MANIFEST_UNKNOWN_KEY", 9, "/source/ref"),
            ],
        ),
        (  # a credential written into the manifest; api_key's location
            """\
                auth: {type: api_key, api_key: abc123, location: body}
              resource: {name: orders}
            """,
            [
                ("DPONE_MANIFEST_ENUM", 6, "/source/client/auth/location"),
            ],
        ),
    ],
)
def test_dlt_config_shape_errors_have_lines(
    tmp_path: Path, body: str, expected: list[tuple[str, int, str]]
) -> None:
    assert validate(tmp_path, body) == expected


def test_static_checks_have_lines(tmp_path: Path) -> None:
    found = validate(
        tmp_path,
        """\
            auth: {type: http_basic, username: me, password: hunter2}
            headers: {Authorization: "Bearer ${TOKEN"}
          resource:
            name: orders
            endpoint:
              path: orders
              params: {since: "{incremental.start_value}"}
              incremental: {cursor_path: updated_at}
          incremental: {cursor_column: updated_at}
        """,
    )
    assert found == [
        ("DPONE_MANIFEST_INLINE_SECRET", 6, "/source/client/auth/password"),
        ("DPONE_MANIFEST_SECRET_REFERENCE", 7, "/source/client/headers/Authorization"),
        ("DPONE_MANIFEST_SOURCE_OPTION", 13, "/source/resource/endpoint/incremental"),
        ("DPONE_MANIFEST_SOURCE_OPTION", 14, "/source/incremental"),
    ]


def test_references_only_where_credentials_go(tmp_path: Path) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(
        "name: orders_api\nsource:\n  type: rest_api\n  client:\n"
        '    base_url: "https://${HOST}/v1/"\n'
        "  resource:\n    name: orders\n"
        '    endpoint: {path: orders, params: {key: "${KEY}"}, headers: {x-key: v}}\n' + SINK
    )
    found = [(e["code"], e["line"], e["pointer"]) for e in errors(path)]
    # Both at once: the schema error on a header name does not hide the stray reference.
    assert found == [
        ("DPONE_MANIFEST_SECRET_REFERENCE", 5, "/source/client/base_url"),
        ("DPONE_MANIFEST_PATTERN", 8, "/source/resource/endpoint/headers/x-key"),
    ]
    path.write_text(path.read_text().replace("x-key", "X-Key"))
    assert [(e["code"], e["line"]) for e in errors(path)] == [
        ("DPONE_MANIFEST_SECRET_REFERENCE", 5)
    ]


def test_a_placeholder_without_incremental(tmp_path: Path) -> None:
    found = validate(
        tmp_path,
        """\
          resource:
            name: orders
            endpoint: {path: orders, params: {since: "{incremental.start_value}"}}
        """,
    )
    assert found == [("DPONE_MANIFEST_SOURCE_OPTION", 8, "/source/resource/endpoint/params/since")]


def test_the_dlt_type(tmp_path: Path) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(
        "name: orders_dlt\nsource:\n  type: dlt\n  ref: not a ref\n"
        '  args: {credentials: "postgresql://me:pw@db/x", table_names: [orders]}\n'
        "  endpoint: orders\n" + SINK
    )
    found = [(e["code"], e["line"], e["pointer"]) for e in errors(path)]
    assert found == [
        ("DPONE_MANIFEST_PATTERN", 4, "/source/ref"),
        ("DPONE_MANIFEST_UNKNOWN_KEY", 6, "/source/endpoint"),
    ]
    path.write_text(
        path.read_text().replace("not a ref", "my_pipe:orders").replace("  endpoint: orders\n", "")
    )
    assert [(e["code"], e["line"]) for e in errors(path)] == [("DPONE_MANIFEST_INLINE_SECRET", 5)]
    path.write_text(path.read_text().replace("me:pw@", "me:${PG_PASSWORD}@"))
    assert errors(path) == []


def test_without_dlt_installed_validation_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "dlt", None)
    found = validate(tmp_path, "resource: {name: orders}\n")
    assert found == [("DPONE_DLT_NOT_INSTALLED", 3, "/source/type")]


_PROBE = """
import json, sys
from click.testing import CliRunner
from dpone.cli.main import cli
import dpone
before = "dlt" in sys.modules
results = [CliRunner().invoke(cli, ["validate", p]).exit_code for p in sys.argv[1:]]
print(json.dumps({"after_import": before, "codes": results, "dlt": "dlt" in sys.modules}))
"""


def test_import_and_validate_do_not_import_dlt(tmp_path: Path) -> None:
    """``import dlt`` costs over a second: only a run of a dlt-backed source pays it."""
    (tmp_path / "m.yaml").write_text(HEAD + "  resource: {name: orders}\n" + SINK)
    manifests = [str(p) for p in sorted(EXAMPLES.glob("*/manifest.yaml"))]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *manifests, str(tmp_path / "m.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert result == {"after_import": False, "codes": [0] * (len(manifests) + 1), "dlt": False}
