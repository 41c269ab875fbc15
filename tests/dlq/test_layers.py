"""The import order inside ``dpone.dlq``, counting the imports under ``TYPE_CHECKING`` (which
``lint-imports`` leaves out for the whole package): the layers ``pyproject.toml`` declares
hold, no module of the package is in an import cycle, and the store is a facade nothing in
the package imports."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

PACKAGE = "dpone.dlq"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("dpone", exclude_type_checking_imports=False)


def _declared_layers() -> list[set[str]]:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    [contract] = [c for c in contracts if c.get("containers") == [PACKAGE]]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def test_the_declared_layers_hold_counting_type_checking_imports(
    graph: grimp.ImportGraph,
) -> None:
    layers = _declared_layers()
    modules = {m.removeprefix(PACKAGE + ".") for m in graph.modules if m.startswith(PACKAGE + ".")}
    assert set().union(*layers) == modules  # every module has its place
    illegal = graph.find_illegal_dependencies_for_layers(
        layers=[grimp.Layer(*sorted(layer)) for layer in layers], containers={PACKAGE}
    )
    assert illegal == set()


def test_no_module_of_the_package_is_in_an_import_cycle(graph: grimp.ImportGraph) -> None:
    modules = sorted(m for m in graph.modules if m.startswith(PACKAGE + "."))
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(PACKAGE + "."):
                back = graph.find_shortest_chain(importer=imported, imported=module)
                assert back is None, f"{module} -> {imported} -> ... -> {module}: {back}"


def test_nothing_inside_the_package_imports_the_store(graph: grimp.ImportGraph) -> None:
    importers = graph.find_modules_that_directly_import(PACKAGE + ".store")
    assert {m for m in importers if m.startswith(PACKAGE + ".")} == set()
