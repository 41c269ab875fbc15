"""Find a custom predicate without importing it: validation must never run a manifest's code.

``dpone validate`` and ``dpone plan`` are what CI runs on an untrusted pull request, so they
prove a predicate resolves by *finding* its module (a file next to the manifest, or an
installed module's spec) and *parsing* it (``ast``), never by executing it. ``dpone run``
imports it later (``dpone.usercode``), after this check has passed.

Which modules a manifest may name is a policy: its own folder, or a module of an installed
third-party distribution that registers a ``dpone.assertion`` entry point. Any other
installed module (``os:system``) needs ``--allow-any-import``.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import re
from pathlib import Path

from dpone.assertions.catalog import ENTRY_POINT_GROUP
from dpone.records import frozen
from dpone.usercode import local_module_file, split_reference

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUES = (
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.JoinedStr,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
)


@frozen
class PredicateProblem:
    """Why a predicate reference does not resolve; ``code`` is a stable ``DPONE_*`` string."""

    code: str
    message: str
    fixes: tuple[str, ...]


def plugin_packages() -> frozenset[str]:
    """Top-level packages of third-party distributions with a ``dpone.assertion`` entry point.

    Only the entry point's *value* is read (a string); nothing is imported here.
    """
    from importlib import metadata  # here: its import alone costs about 10 ms

    found = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        if dist is not None and dist.name.lower() == "dpone":
            continue  # dpone's own built-ins are not a licence to name any dpone module
        found.add(ep.value.split(":", 1)[0].split(".", 1)[0])
    return frozenset(found)


def _installed_spec(module_name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of an installed module, found part by part so no parent package is imported.

    ``importlib.util.find_spec("a.b")`` imports ``a`` to read its ``__path__``; the top-level
    lookup alone imports nothing, and submodules are searched in the parent's locations.
    """
    parts = module_name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = importlib.machinery.PathFinder.find_spec(
                ".".join(parts[: i + 1]), list(spec.submodule_search_locations)
            )
    except (ImportError, ValueError):
        return None
    return spec


def _bindings(body: list[ast.stmt]) -> dict[str, ast.AST | None]:  # noqa: C901 (one branch per kind of statement that binds a name)
    """Names bound at module level (through if/try/with blocks, not into defs or classes).

    The value is the bound expression where there is one, else ``None`` (def, class, import).
    ``"*"`` marks a star import or a module ``__getattr__``: names that cannot be listed.
    """
    names: dict[str, ast.AST | None] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = None
            if node.name == "__getattr__":
                names["*"] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is not None:
                names[node.target.id] = node.value
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".", 1)[0]
                names[bound] = None
        elif isinstance(node, ast.If):
            names.update(_bindings(node.body))
            names.update(_bindings(node.orelse))
        elif isinstance(node, ast.Try):
            names.update(_bindings(node.body))
            for handler in node.handlers:
                names.update(_bindings(handler.body))
            names.update(_bindings(node.orelse))
            names.update(_bindings(node.finalbody))
        elif isinstance(node, ast.With):
            names.update(_bindings(node.body))
    return names


def _check_source(spec: str, attr: str, source: Path, shown: str) -> PredicateProblem | None:
    try:
        tree = ast.parse(source.read_bytes(), filename=shown)
    except SyntaxError as exc:
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_SYNTAX",
            f"predicate {spec}: {shown} does not parse (line {exc.lineno})",
            (f"fix the syntax error in {shown}",),
        )
    except (OSError, ValueError):
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_NOT_FOUND",
            f"predicate {spec}: {shown} cannot be read",
            (f"make {shown} a readable Python source file",),
        )
    names = _bindings(tree.body)
    if attr not in names:
        if "*" in names:
            return None  # `from x import *` or a module __getattr__: resolved when run imports
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_NOT_FOUND",
            f"predicate {spec}: {shown} defines no top-level {attr}",
            (f"define `def {attr}(row) -> bool` at the top level of {shown}",),
        )
    if isinstance(names[attr], _VALUES):
        return PredicateProblem(
            "DPONE_ASSERTION_PREDICATE_NOT_CALLABLE",
            f"predicate {spec} is not callable",
            ("point the predicate at a function",),
        )
    return None


def check_reference(
    spec: str, base_dir: Path, *, allow_any_import: bool = False
) -> PredicateProblem | None:
    """``None`` when ``spec`` resolves under the import policy; the problem otherwise.

    Never imports the predicate's module (nor, for a dotted name, its parent packages).
    """
    module_name, attr = split_reference(spec)
    if not _DOTTED.match(module_name) or not _IDENT.match(attr):
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_NOT_FOUND",
            f"predicate {spec} is not of the form module:function",
            ("write the predicate as `module:function`, e.g. `quality:known_kind`",),
        )
    local = local_module_file(module_name, base_dir)
    if local is not None:
        return _check_source(spec, attr, local, local.relative_to(base_dir).as_posix())
    found = _installed_spec(module_name)
    if found is None:
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_NOT_FOUND",
            f"predicate {spec}: no module {module_name} next to the manifest or installed",
            (f"put {module_name.replace('.', '/')}.py next to the manifest and define {attr}",),
        )
    top = module_name.split(".", 1)[0]
    if not allow_any_import and top not in plugin_packages():
        return PredicateProblem(
            "DPONE_MANIFEST_PREDICATE_NOT_ALLOWED",
            f"predicate {spec}: {module_name} is neither next to the manifest nor part of an "
            "installed dpone.assertion plugin",
            (
                f"move {attr} into a module next to the manifest",
                "or, if you trust every module installed here, pass --allow-any-import",
            ),
        )
    origin = found.origin
    if origin is None or not origin.endswith(".py"):
        # Built-in or compiled: there is no source to parse; the module exists, and the
        # attribute is checked when `dpone run` imports it.
        return None
    return _check_source(spec, attr, Path(origin), module_name)
