"""The layers contract inside ``dpone.manifest`` (pyproject.toml) holds with the imports under
``if TYPE_CHECKING:`` counted too, which ``lint-imports`` leaves out: an annotation-only
import upward is how a cycle hides (a check naming the compile context of the module that
runs it)."""

from __future__ import annotations

import tomllib
from typing import Any

import grimp

from tests.support.paths import ROOT

CONTAINER = "dpone.manifest"


def _contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and c.get("containers") == [CONTAINER]
    ]
    assert len(found) == 1
    contract: dict[str, Any] = found[0]
    return contract


def _layers(contract: dict[str, Any]) -> list[grimp.Layer]:
    return [grimp.Layer(*(t.strip() for t in line.split("|"))) for line in contract["layers"]]


def test_the_manifest_layers_hold_counting_type_checking_imports() -> None:
    graph = grimp.build_graph("dpone", exclude_type_checking_imports=False)
    illegal = graph.find_illegal_dependencies_for_layers(
        layers=_layers(_contract()), containers={CONTAINER}
    )
    assert sorted(f"{d.importer} -> {d.imported}" for d in illegal) == []


def test_every_manifest_module_has_its_layer() -> None:
    """A module left out of the contract would be free to import any other."""
    graph = grimp.build_graph("dpone")
    named = {t.strip() for line in _contract()["layers"] for t in line.split("|")}
    children = {m.removeprefix(CONTAINER + ".") for m in graph.find_children(CONTAINER)}
    assert children == named
