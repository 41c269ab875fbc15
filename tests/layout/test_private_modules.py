"""A private module (its name starts with ``_``) is imported only from inside its own package.

``dpone.connectors.sources._http`` may be imported by any module under
``dpone.connectors.sources``, never by ``dpone.runtime`` or ``dpone.connectors.sinks``: what
another package needs is public, in a module without the underscore. ``dpone._lazy`` and
``dpone._version`` sit at the root, so the whole package may import them. The imports under
``if TYPE_CHECKING:`` count: an annotation that names a private module still couples its
importer to that module's insides. import-linter keeps the connectors' private modules in
their packages by name (pyproject.toml); this test keeps the rule for every private module,
including the ones added later.
"""

from __future__ import annotations

import grimp

PACKAGE = "dpone"


def _graph() -> grimp.ImportGraph:
    # No cache: a stale one (another branch's modules) would hide an import.
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def _is_private(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last.startswith("_") and last not in ("__init__", "__main__")


def _outside_imports(graph: grimp.ImportGraph) -> list[str]:
    """Each import of a private module from outside its parent package: ``importer -> module``."""
    found = []
    for module in sorted(filter(_is_private, graph.modules)):
        parent = module.rsplit(".", 1)[0]
        for importer in sorted(graph.find_modules_that_directly_import(module)):
            if importer != parent and not importer.startswith(parent + "."):
                found.append(f"{importer} -> {module}")
    return found


def test_the_rule_allows_the_package_and_its_subpackages_only() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.a._inner", "pkg.a.b", "pkg.a.b.c", "pkg.d", "pkg._root"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.a._inner")
    graph.add_import(importer="pkg.a.b.c", imported="pkg.a._inner")
    graph.add_import(importer="pkg.d", imported="pkg._root")
    graph.add_import(importer="pkg.a.b", imported="pkg._root")
    assert _outside_imports(graph) == []

    graph.add_import(importer="pkg.d", imported="pkg.a._inner")
    assert _outside_imports(graph) == ["pkg.d -> pkg.a._inner"]


def test_dpone_has_private_modules_for_the_rule_to_keep() -> None:
    private = set(filter(_is_private, _graph().modules))
    assert {"dpone._lazy", "dpone.connectors.sources._http"} <= private


def test_private_modules_are_imported_only_inside_their_package() -> None:
    outside = _outside_imports(_graph())
    assert outside == [], "\n".join(outside)
