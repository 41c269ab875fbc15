"""The repository's shape (SPEC §1): the published schemas live in the package, and the
top-level ``schemas/`` SPEC §1 and §10 name is that very folder; the tests' helpers live in
modules, their conftests hold fixtures only."""

from __future__ import annotations

import ast
import re
from importlib import resources

from tests.support.paths import ROOT


def test_the_top_level_schemas_folder_is_the_packaged_one() -> None:
    top, packaged = ROOT / "schemas", ROOT / "dpone" / "schemas"
    assert top.is_symlink()
    assert not packaged.is_symlink()
    assert top.resolve() == packaged.resolve()
    shipped = resources.files("dpone").joinpath("schemas")
    names = sorted(p.name for p in packaged.glob("*.schema.json"))
    assert len(names) >= 11  # SPEC §10's documents
    assert sorted(p.name for p in shipped.iterdir() if p.name.endswith(".schema.json")) == names


def test_no_test_module_imports_from_a_conftest() -> None:
    """A conftest is pytest's to load: helpers shared by tests are plain modules
    (``tests/support/``), imported like any other."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[-1] == "conftest" for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_no_source_names_a_step_or_an_issue_of_its_history() -> None:
    """Comments and docs say why the code is as it is; which step or issue brought it there
    is the commit log's to say, and means nothing to the next reader."""
    history = re.compile(r"\bStep \d|\b[Ii]ssue #\d")
    files = [*(ROOT / "docs").glob("*.md")]
    for folder in ("dpone", "tests", "bench", "tools"):
        files += (ROOT / folder).rglob("*.py")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(files)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if history.search(line)
    ]
    assert files
    assert found == []


def test_the_users_docs_name_no_document_they_do_not_have() -> None:
    """README and docs speak to the package's users: the product's design documents (its
    seeds) are not theirs to read, so a doc that cites one explains nothing."""
    seed = re.compile(r"\bseed\b|\bseeds/|\bSPEC\.md\b", re.IGNORECASE)
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(files)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if seed.search(line)
    ]
    assert len(files) > 10
    assert found == []


#: Modules stay small enough to hold in one's head (STYLE): about 450 lines, split by
#: responsibility; past this one is split before it grows further.
MAX_MODULE_LINES = 500


def test_no_module_outgrows_a_reading() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "dpone").rglob("*.py")
    }
    assert len(sizes) > 100
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}
