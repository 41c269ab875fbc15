"""The repository's shape (SPEC §1): the published schemas live in the package, and the
top-level ``schemas/`` SPEC §1 and §10 name is that very folder."""

from __future__ import annotations

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
