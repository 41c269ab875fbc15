"""No import cycle among dpone's modules, counting the imports under ``if TYPE_CHECKING:``.

import-linter's layers (pyproject.toml, ``exclude_type_checking_imports = false``) count them
too, but only between the packages a contract names; a loop inside one package, or between
two modules no contract orders, would pass them. An import made for an annotation still ties
the modules of a loop together: each then needs the others to be read, typed or moved. This
test builds the graph with every import and names each loop as a chain of imports.
"""

from __future__ import annotations

import grimp

PACKAGE = "dpone"


def _graph() -> grimp.ImportGraph:
    # No cache: a stale one (another branch's modules) would hide a cycle.
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def _tangles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The sets of modules that import one another, directly or not (two or more each)."""
    seen: set[str] = set()
    tangles = []
    for module in sorted(graph.modules):
        if module in seen:
            continue
        upstream = graph.find_upstream_modules(module)
        downstream = graph.find_downstream_modules(module)
        tangle = (upstream & downstream) | {module}
        seen |= tangle
        if len(tangle) > 1:
            tangles.append(tangle)
    return tangles


def _shortest_loop(graph: grimp.ImportGraph, tangle: set[str]) -> tuple[str, ...]:
    """A shortest chain of imports from the tangle's first module back to itself."""
    start = min(tangle)
    loops = []
    for imported in sorted(graph.find_modules_directly_imported_by(start) & tangle):
        back = graph.find_shortest_chain(importer=imported, imported=start)
        if back is not None:
            loops.append((start, *back))
    return min(loops, key=len)


def _describe(graph: grimp.ImportGraph, tangle: set[str]) -> str:
    loop = " -> ".join(_shortest_loop(graph, tangle))
    return f"{loop} (one loop of {len(tangle)} modules: {', '.join(sorted(tangle))})"


def test_the_cycle_finder_names_a_loop() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.d")
    [tangle] = _tangles(graph)
    assert tangle == {"pkg.a", "pkg.b", "pkg.c"}
    assert _shortest_loop(graph, tangle) == ("pkg.a", "pkg.b", "pkg.c", "pkg.a")


def test_no_import_cycle_counting_type_checking_imports() -> None:
    graph = _graph()
    loops = [_describe(graph, tangle) for tangle in _tangles(graph)]
    assert loops == [], "\n".join(loops)
