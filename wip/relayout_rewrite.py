#!/usr/bin/env python3
"""Rewrite code written against dpone's pre-Step-11 package layout to the Step 11 layout
(issue #15, /work/wt/LAYOUT.md). Re-runnable: a second run changes nothing.

Usage::

    python3 relayout_rewrite.py [--check] [--no-ruff] [--replay-run | --no-replay-run] PATH...

PATH is a file or a folder (walked; .git, .venv, caches and build folders skipped). Python
files get their import statements, dotted names (strings such as mock.patch targets,
docstrings, comments), module-attribute uses and DLQ-store method calls rewritten; other
text files (.md, .toml, .yaml, ...) their dotted names and file paths. Afterwards, when a
``ruff`` is found (PATH or <repo>/.venv/bin/ruff), the changed Python files get
``ruff check --select I,F401 --fix`` and ``ruff format`` (import order, imports left unused).
``--check`` only lists what would change (exit 1 if anything would).

THE MAPPING
===========

Whole modules (every form: ``from OLD import x``, ``import OLD [as y]``, ``from PKG import
mod`` for OLD = PKG.mod, dotted strings "OLD.name", and file paths dpone/OLD.py)::

    dpone.dlq.canonical    -> dpone.canonical
    dpone.dlq.ids          -> dpone.ids
    dpone.dlq.verify       -> dpone.ops.verification
    dpone.dlq.summary      -> dpone.ops.summary
    dpone.dlq.replay       -> dpone.ops.replay
    dpone.dlq.retention    -> dpone.ops.retention
    dpone.evidence.gate    -> dpone.ops.gate
    dpone.ops (ops.py)     -> dpone.ops (ops/__init__.py; file path only)
    tests.dlqfiles         -> tests.support.dlqfiles
    tests.postgres         -> tests.support.postgres
    dpone.runtime.replay   -> dpone.ops.replay_run   (only once that move happened: applied
                              when <repo>/dpone/ops/replay_run.py exists and
                              dpone/runtime/replay.py does not, or with --replay-run)

LAYOUT.md named two modules ``dpone/ops/verify.py`` and ``dpone/ops/replay_plan.py``; they
would shadow the API functions ``dpone.ops.verify`` and ``dpone.ops.replay_plan`` (SPEC §11:
importing a submodule rebinds the package attribute of the same name), so they are
``ops/verification.py`` and ``ops/replay.py``. Code already written with LAYOUT.md's names is
rewritten too, but only where the name is a module (an import statement, or followed by
``.attribute``); ``dpone.ops.verify(...)`` and ``from dpone.ops import verify`` are the API
and stay::

    dpone.ops.verify       -> dpone.ops.verification   (module uses only)
    dpone.ops.replay_plan  -> dpone.ops.replay         (module uses only)

Single names that left the successor of their old module (imports, dotted strings)::

    dpone.dlq.ids.check_identifier     -> dpone.dlq.fsio      (raises the DLQ's errors)
    dpone.dlq.verify.Finding           -> dpone.dlq.integrity
    dpone.dlq.verify.verify_written    -> dpone.dlq.integrity
    dpone.dlq.fsio.create_exclusive    -> dpone.durable
    dpone.dlq.fsio.unlink_quietly      -> dpone.durable
    dpone.dlq.fsio.temp_name           -> dpone.durable
    dpone.dlq.segments.is_temp_name    -> dpone.durable
    dpone.dlq.DlqSummary               -> dpone.ops.summary   (dpone.dlq never imports ops)
    dpone.contracts.convert (function) -> dpone.contracts.convert (``from dpone.contracts
                                          import convert`` -> ``from dpone.contracts.convert
                                          import convert``: the lazy package no longer
                                          re-exports a name its submodule has)
    dpone.manifest.plan.AssertionSpec / Policy / Scope -> dpone.assertions.spec  (assertions
    dpone.evidence.model.AssertionVerdict / Verdict    -> dpone.assertions.spec   own their
    dpone.assertions.base|catalog.Scope / ValueKind    -> dpone.assertions.spec   types)
    tests.conftest.ROOT / EXAMPLES / example_manifests / examples   -> tests.support.paths
    tests.conftest.CliRun / dpone_subprocess / dpone_killed_at      -> tests.support.processes
    tests.conftest.pg_url / pg_schema                               -> tests.support.postgres

Module-attribute uses, also as ``(fsio, "create_exclusive")`` in ``monkeypatch.setattr``
(``from dpone import durable`` is added where needed)::

    fsio.create_exclusive / fsio.unlink_quietly / fsio.temp_name   -> durable.<same>
    segments.is_temp_name                                          -> durable.is_temp_name

DlqStore lost its verify()/repair()/summary() methods; calls on a receiver whose text ends in
``store``/``dlq`` (optionally called: ``store``, ``self.dlq()``, ``pipeline.store()``) become
(the import is added)::

    X.verify(args)   -> verify_store(X, args)   from dpone.ops.verification
    X.repair(args)   -> repair_store(X, args)   from dpone.ops.verification
    X.summary(args)  -> summarize(X, args)      from dpone.ops.summary

Unchanged on purpose: ``from dpone.dlq import fsio`` (fsio stays: confinement + errors),
``fsio.replace_atomic`` (a translating wrapper over durable.replace_at), ``from dpone import
ops``, ``store.check_written(...)``, ``from dpone.dlq import canonical_json, checksum,
Finding`` (dpone.dlq still re-exports them, lazily).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# --- the mapping (the docstring above lists the same) ---------------------------------------------

MODULE_MOVES: dict[str, str] = {
    "dpone.dlq.canonical": "dpone.canonical",
    "dpone.dlq.ids": "dpone.ids",
    "dpone.dlq.verify": "dpone.ops.verification",
    "dpone.dlq.summary": "dpone.ops.summary",
    "dpone.dlq.replay": "dpone.ops.replay",
    "dpone.dlq.retention": "dpone.ops.retention",
    "dpone.evidence.gate": "dpone.ops.gate",
    "tests.dlqfiles": "tests.support.dlqfiles",
    "tests.postgres": "tests.support.postgres",
}
#: Applied only after runtime/replay.py moved (see the docstring).
REPLAY_RUN_MOVE: dict[str, str] = {"dpone.runtime.replay": "dpone.ops.replay_run"}
#: LAYOUT.md's module names that clash with API functions: rewritten only as modules.
MODULE_ONLY_MOVES: dict[str, str] = {
    "dpone.ops.verify": "dpone.ops.verification",
    "dpone.ops.replay_plan": "dpone.ops.replay",
}
#: (module, after MODULE_MOVES; name) -> the module that defines the name now.
SYMBOL_MOVES: dict[tuple[str, str], str] = {
    ("dpone.ids", "check_identifier"): "dpone.dlq.fsio",
    ("dpone.ops.verification", "Finding"): "dpone.dlq.integrity",
    ("dpone.ops.verification", "verify_written"): "dpone.dlq.integrity",
    ("dpone.dlq.fsio", "create_exclusive"): "dpone.durable",
    ("dpone.dlq.fsio", "unlink_quietly"): "dpone.durable",
    ("dpone.dlq.fsio", "temp_name"): "dpone.durable",
    ("dpone.dlq.segments", "is_temp_name"): "dpone.durable",
    ("dpone.dlq", "DlqSummary"): "dpone.ops.summary",
    ("dpone.contracts", "convert"): "dpone.contracts.convert",  # lazy init: no shadowing
    ("dpone.manifest.plan", "AssertionSpec"): "dpone.assertions.spec",
    ("dpone.manifest.plan", "Policy"): "dpone.assertions.spec",
    ("dpone.manifest.plan", "Scope"): "dpone.assertions.spec",
    ("dpone.evidence.model", "AssertionVerdict"): "dpone.assertions.spec",
    ("dpone.evidence.model", "Verdict"): "dpone.assertions.spec",
    ("dpone.assertions.base", "Scope"): "dpone.assertions.spec",
    ("dpone.assertions.base", "ValueKind"): "dpone.assertions.spec",
    ("dpone.assertions.catalog", "Scope"): "dpone.assertions.spec",
    ("dpone.assertions.catalog", "ValueKind"): "dpone.assertions.spec",
    ("tests.conftest", "ROOT"): "tests.support.paths",
    ("tests.conftest", "EXAMPLES"): "tests.support.paths",
    ("tests.conftest", "example_manifests"): "tests.support.paths",
    ("tests.conftest", "examples"): "tests.support.paths",
    ("tests.conftest", "CliRun"): "tests.support.processes",
    ("tests.conftest", "dpone_subprocess"): "tests.support.processes",
    ("tests.conftest", "dpone_killed_at"): "tests.support.processes",
    ("tests.conftest", "pg_url"): "tests.support.postgres",
    ("tests.conftest", "pg_schema"): "tests.support.postgres",
}
#: (module alias, attribute) -> the alias of the module that has it now, and its import.
ATTRIBUTE_MOVES: dict[tuple[str, str], tuple[str, str]] = {
    ("fsio", "create_exclusive"): ("durable", "from dpone import durable"),
    ("fsio", "unlink_quietly"): ("durable", "from dpone import durable"),
    ("fsio", "temp_name"): ("durable", "from dpone import durable"),
    ("segments", "is_temp_name"): ("durable", "from dpone import durable"),
}
#: DlqStore methods that became ops functions: method -> (module, function).
METHOD_MOVES: dict[str, tuple[str, str]] = {
    "verify": ("dpone.ops.verification", "verify_store"),
    "repair": ("dpone.ops.verification", "repair_store"),
    "summary": ("dpone.ops.summary", "summarize"),
}
STORE_RECEIVER = re.compile(r"(?i)\w*(?:store|dlq)(?:\(\))?")
#: File paths in prose (docs, docstrings), besides those derived from MODULE_MOVES.
EXTRA_PATH_MOVES: dict[str, str] = {"dpone/ops.py": "dpone/ops/__init__.py"}

TEXT_SUFFIXES = {".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml"}
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "build",
    "dist",
    "node_modules",
    ".hypothesis",
}


# --- the rewriter -------------------------------------------------------------------------------


@dataclass
class Rules:
    modules: dict[str, str]
    module_only: dict[str, str] = field(default_factory=lambda: dict(MODULE_ONLY_MOVES))

    def module(self, name: str, *, as_module: bool) -> str:
        """The new dotted name of module ``name`` (itself when it did not move)."""
        if name in self.modules:
            return self.modules[name]
        if as_module and name in self.module_only:
            return self.module_only[name]
        return name

    def submodule(self, package: str, name: str) -> tuple[str, str] | None:
        """``from package import name`` where ``package.name`` is a moved module."""
        full = f"{package}.{name}"
        if full not in self.modules:
            return None
        new_package, new_name = self.modules[full].rsplit(".", 1)
        return new_package, new_name


def _line_offsets(source: str) -> list[int]:
    """Character offset of each line start (1-based line numbers index [n - 1])."""
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _offset(source_lines: list[str], offsets: list[int], line: int, col_bytes: int) -> int:
    """Character offset of an ast (line, UTF-8 byte column)."""
    text = source_lines[line - 1]
    return offsets[line - 1] + len(text.encode("utf-8")[:col_bytes].decode("utf-8"))


def _splice(source: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _function_of(tree: ast.Module) -> dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Each node -> the innermost function around it."""
    owner: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if inner is not None:
                owner[child] = inner
            visit(child, inner)

    visit(tree, None)
    return owner


def _local_import_edit(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    statement: str,
    lines: list[str],
    offsets: list[int],
) -> tuple[int, int, str] | None:
    """An edit putting ``statement`` first in ``function``'s body (after its docstring)."""
    body = function.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        and len(body) > 1
    ):
        first = body[1]
    if first.lineno == function.lineno:
        return None  # a one-line function: the import goes to the top
    for node in body:
        if isinstance(node, ast.ImportFrom) and statement == _render_from(
            node.module or "", [(a.name, a.asname) for a in node.names]
        ):
            return None
    prefix = lines[first.lineno - 1].encode("utf-8")[: first.col_offset].decode("utf-8")
    if prefix.strip():
        return None
    at = offsets[first.lineno - 1]
    return at, at, f"{prefix}{statement}\n"


def rewrite_methods(source: str, needed: set[str], *, package: bool) -> str:
    """``store.verify(...)`` -> ``verify_store(store, ...)`` (and repair, summary).

    In the package (``package``), the import goes into the function that calls, as dpone
    keeps its heavy imports lazy; elsewhere (tests, benchmarks) to the top of the file.
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = _line_offsets(source)
    owner = _function_of(tree) if package else {}
    edits: list[tuple[int, int, str]] = []
    local: dict[tuple[int, str], tuple[int, int, str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in METHOD_MOVES or node.end_lineno is None:
            continue
        receiver = ast.get_source_segment(source, node.func.value)
        # the receiver's last part must name a store: store, self._store, dlq(), make_store()
        if receiver is None or not STORE_RECEIVER.fullmatch(receiver.rsplit(".", 1)[-1]):
            continue
        call = ast.get_source_segment(source, node)
        func = ast.get_source_segment(source, node.func)
        if call is None or func is None or not call.startswith(func):
            continue
        inner = call[len(func) :].strip()
        if not (inner.startswith("(") and inner.endswith(")")):
            continue
        args = inner[1:-1].strip()
        module, function = METHOD_MOVES[node.func.attr]
        text = f"{function}({receiver}, {args})" if args else f"{function}({receiver})"
        start = _offset(lines, offsets, node.lineno, node.col_offset)
        end = _offset(lines, offsets, node.end_lineno, node.end_col_offset or 0)
        edits.append((start, end, text))
        statement = f"from {module} import {function}"
        around = owner.get(node)
        edit = None
        if around is not None:
            edit = local.get((id(around), statement)) or _local_import_edit(
                around, statement, lines, offsets
            )
        if edit is None:
            needed.add(statement)
        else:
            local[(id(around), statement)] = edit
    return _splice(source, edits + list(local.values()))


def _render_from(module: str, names: list[tuple[str, str | None]]) -> str:
    parts = [name if alias is None else f"{name} as {alias}" for name, alias in names]
    return f"from {module} import {', '.join(parts)}"


def rewrite_imports(source: str, rules: Rules, warnings: list[str]) -> str:
    """Import statements: moved modules, submodules imported through their package, and
    names that left their module."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = _line_offsets(source)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            new_names = []
            changed = False
            for alias in node.names:
                new = rules.module(alias.name, as_module=True)
                changed |= new != alias.name
                # `import a.b.c` binds `a`; its uses spell a.b.c and are rewritten as text
                new_names.append(new if alias.asname is None else f"{new} as {alias.asname}")
            if changed:
                start = _offset(lines, offsets, node.lineno, node.col_offset)
                end = _offset(
                    lines, offsets, node.end_lineno or node.lineno, node.end_col_offset or 0
                )
                edits.append((start, end, "import " + ", ".join(new_names)))
            continue
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        old_module = node.module
        new_module = rules.module(old_module, as_module=True)
        groups: dict[str, list[tuple[str, str | None]]] = {}
        changed = new_module != old_module
        for alias in node.names:
            target, name, asname = new_module, alias.name, alias.asname
            moved = rules.submodule(old_module, alias.name)
            if moved is not None:
                target, name = moved
                if name != alias.name and asname is None:
                    asname = alias.name  # keep the local name the code uses
                changed = True
            elif (new_module, alias.name) in SYMBOL_MOVES:
                target = SYMBOL_MOVES[(new_module, alias.name)]
                changed = True
            groups.setdefault(target, []).append((name, asname))
        if not changed:
            continue
        end_line = node.end_lineno or node.lineno
        first = lines[node.lineno - 1]
        prefix = first.encode("utf-8")[: node.col_offset].decode("utf-8")
        if prefix.strip():
            warnings.append(f"line {node.lineno}: import shares its line; left as is")
            continue
        segment = "".join(lines[node.lineno - 1 : end_line])
        stmt_end = _offset(lines, offsets, end_line, node.end_col_offset or 0)
        tail = source[stmt_end : offsets[end_line]]  # a trailing comment, kept
        inner_comments = re.findall(r"#[^\n]*", segment[: stmt_end - offsets[node.lineno - 1]])
        if inner_comments:
            warnings.append(
                f"line {node.lineno}: comments inside the import dropped: {inner_comments}"
            )
        tail_comment = tail.rstrip("\n")
        rendered = [prefix + _render_from(m, names) + tail_comment for m, names in groups.items()]
        start = offsets[node.lineno - 1]
        end = offsets[end_line]
        newline = "\n" if tail.endswith("\n") else ""
        edits.append((start, end, "\n".join(rendered) + newline))
    return _splice(source, edits)


def _dotted(old: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])")


def rewrite_text(text: str, rules: Rules) -> str:
    """Dotted names anywhere (strings, docstrings, comments, attribute chains) and paths."""
    for old, new in sorted(rules.modules.items(), key=lambda kv: -len(kv[0])):
        text = _dotted(old).sub(new, text)
        old_path, new_path = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        text = re.sub(r"(?<![\w/])" + re.escape(old_path), new_path, text)
        # the same path without the package prefix (e.g. "dlq/replay.py" in prose)
        short_old = old_path.split("/", 1)[1]
        short_new = new_path.split("/", 1)[1]
        if old.startswith("dpone."):
            text = re.sub(r"(?<![\w/.])" + re.escape(short_old), short_new, text)
    for old, new in rules.module_only.items():
        # a module only when followed by .attribute (dpone.ops.verify(...) is the API)
        text = re.sub(r"(?<![\w.])" + re.escape(old) + r"(?=\.[A-Za-z_])", new, text)
        old_path, new_path = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        text = re.sub(r"(?<![\w/])" + re.escape(old_path), new_path, text)
    for old, new in EXTRA_PATH_MOVES.items():
        text = re.sub(r"(?<![\w/])" + re.escape(old) + r"(?![\w/])", new, text)
    for (module, name), target in SYMBOL_MOVES.items():
        if target == f"{module}.{name}":
            continue  # "module.name" is that very module: only import statements change
        text = re.sub(
            r"(?<![\w.])" + re.escape(f"{module}.{name}") + r"(?![\w])", f"{target}.{name}", text
        )
    return text


def rewrite_attributes(source: str, needed: set[str]) -> str:
    """``fsio.create_exclusive`` -> ``durable.create_exclusive``, also in the (module, "name")
    form of ``monkeypatch.setattr(fsio, "create_exclusive", ...)``."""
    for (alias, attr), (new_alias, statement) in ATTRIBUTE_MOVES.items():
        dotted = re.compile(r"(?<![\w.])" + re.escape(f"{alias}.{attr}") + r"\b")
        pair = re.compile(r"(?<![\w.])" + re.escape(alias) + r"(\s*,\s*)([\"'])" + attr + r"\2")
        if dotted.search(source) or pair.search(source):
            source = dotted.sub(f"{new_alias}.{attr}", source)
            source = pair.sub(new_alias + r"\1\2" + attr + r"\2", source)
            needed.add(statement)
    return source


def _has_import(tree: ast.Module, statement: str) -> bool:
    match = re.fullmatch(r"from (\S+) import (\w+)", statement)
    assert match is not None
    module, name = match.groups()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == module
            and node.level == 0
            and any(a.name == name and a.asname is None for a in node.names)
        ):
            return True
    return False


def add_imports(source: str, needed: set[str]) -> str:
    """Add each needed ``from x import y`` at the top (before the first project import)."""
    tree = ast.parse(source)
    missing = sorted(s for s in needed if not _has_import(tree, s))
    if not missing:
        return source
    lines = source.splitlines(keepends=True)
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    project = [
        n
        for n in top
        if (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in ("dpone", "tests"))
        or (isinstance(n, ast.Import) and n.names[0].name.split(".")[0] in ("dpone", "tests"))
    ]
    if project:
        at = project[0].lineno - 1
    elif top:
        at = top[-1].end_lineno or top[-1].lineno
    else:
        body = tree.body
        docstring = (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        )
        at = (body[0].end_lineno or 0) if docstring else 0
    block = "".join(s + "\n" for s in missing)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def rewrite_python(source: str, rules: Rules, warnings: list[str], *, package: bool) -> str:
    try:
        ast.parse(source)
    except SyntaxError as exc:
        warnings.append(f"not Python ({exc.msg}); rewrote dotted names only")
        return rewrite_text(source, rules)
    needed: set[str] = set()
    source = rewrite_methods(source, needed, package=package)
    source = rewrite_imports(source, rules, warnings)
    source = rewrite_text(source, rules)
    source = rewrite_attributes(source, needed)
    return add_imports(source, needed)


# --- files --------------------------------------------------------------------------------------


def iter_files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
            for name in sorted(files):
                file = Path(folder) / name
                if file.suffix in TEXT_SUFFIXES or name == "Makefile":
                    yield file


def repo_root(path: Path) -> Path | None:
    for folder in [path.resolve(), *path.resolve().parents]:
        if (folder / "dpone" / "__init__.py").is_file():
            return folder
    return None


def replay_run_moved(paths: list[Path]) -> bool:
    for path in paths:
        root = repo_root(path)
        if root is not None:
            ops = root / "dpone" / "ops" / "replay_run.py"
            return ops.is_file() and not (root / "dpone" / "runtime" / "replay.py").exists()
    return False


def find_ruff(paths: list[Path]) -> str | None:
    for path in paths:
        root = repo_root(path)
        if root is not None and (root / ".venv" / "bin" / "ruff").is_file():
            return str(root / ".venv" / "bin" / "ruff")
    return shutil.which("ruff")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="list what would change; write nothing"
    )
    parser.add_argument("--no-ruff", action="store_true", help="do not run ruff on changed files")
    move = parser.add_mutually_exclusive_group()
    move.add_argument("--replay-run", dest="replay_run", action="store_true", default=None)
    move.add_argument("--no-replay-run", dest="replay_run", action="store_false")
    args = parser.parse_args(argv)

    modules = dict(MODULE_MOVES)
    with_replay_run = (
        args.replay_run if args.replay_run is not None else replay_run_moved(args.paths)
    )
    if with_replay_run:
        modules.update(REPLAY_RUN_MOVE)
    rules = Rules(modules)
    changed: list[Path] = []
    for file in iter_files(args.paths):
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        warnings: list[str] = []
        if file.suffix in (".py", ".pyi"):
            root = repo_root(file)
            package = root is not None and file.resolve().is_relative_to(root / "dpone")
            new = rewrite_python(text, rules, warnings, package=package)
        else:
            new = rewrite_text(text, rules)
        for warning in warnings:
            print(f"{file}: warning: {warning}", file=sys.stderr)
        if new != text:
            changed.append(file)
            if not args.check:
                file.write_text(new, encoding="utf-8")
    for file in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {file}")
    if args.check:
        return 1 if changed else 0
    python = [str(f) for f in changed if f.suffix in (".py", ".pyi")]
    ruff = None if args.no_ruff else find_ruff(args.paths)
    if python and ruff is not None:
        subprocess.run(
            [ruff, "check", "--select", "I,F401", "--fix", "--quiet", *python], check=False
        )
        subprocess.run([ruff, "format", "--quiet", *python], check=False)
    elif python:
        print("ruff not found: sort the imports of the rewritten files yourself", file=sys.stderr)
    print(
        f"{len(changed)} file(s) rewritten"
        + (" (dpone.runtime.replay -> dpone.ops.replay_run included)" if with_replay_run else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
