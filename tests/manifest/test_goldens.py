"""Golden invalid manifests: each names the codes, lines and columns it must produce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.errors import ManifestError
from dpone.manifest.compiler import compile_manifest
from tests.support.paths import EXAMPLES

INVALID = EXAMPLES / "invalid"
EXPECTED: dict[str, list[dict[str, object]]] = json.loads(
    (INVALID / "expected.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden(name: str) -> None:
    with pytest.raises(ManifestError) as info:
        compile_manifest(INVALID / name)
    got = [(e.code, e.line, e.column) for e in info.value.errors]
    want = [(w["code"], w["line"], w["column"]) for w in EXPECTED[name]]
    assert len(got) == len(want), got
    # "column": null in a golden means the column is not pinned (parser-dependent).
    got = [
        (c, ln, col if w[2] is not None else None)
        for (c, ln, col), w in zip(got, want, strict=True)
    ]
    assert got == want


def test_every_invalid_file_has_a_golden() -> None:
    assert sorted(p.name for p in INVALID.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED)[:6])
def test_cli_validate_exits_2_and_names_code_line_column(name: str) -> None:
    path = str(INVALID / name)
    result = CliRunner().invoke(cli, ["validate", path, "--format", "json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    errors = doc["manifests"][0]["errors"]
    first = EXPECTED[name][0]
    assert errors[0]["code"] == first["code"]
    assert errors[0]["line"] == first["line"]
    assert "Traceback" not in result.output


def test_cli_validate_text_names_file_line_column() -> None:
    name = sorted(EXPECTED)[0]
    path = INVALID / name
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    first = EXPECTED[name][0]
    assert f"{path}:{first['line']}" in result.stderr
    assert str(first["code"]) in result.stderr


def test_goldens_live_next_to_real_examples() -> None:
    assert Path(INVALID).is_dir()
    assert len(EXPECTED) >= 20
