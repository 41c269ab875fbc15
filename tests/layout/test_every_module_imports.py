"""Every dpone module imports. A package's lazy ``__getattr__`` makes any ``from package import
name`` type-check, so a name whose module was moved or deleted fails only when the importing
module is loaded; this loads every one of them."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import dpone

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(dpone.__path__, prefix="dpone.")
    if info.name != "dpone.__main__"  # running it is the CLI
)


def test_the_package_has_its_modules() -> None:
    assert len(MODULES) > 200
    assert "dpone.manifest.checks.legacy" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_the_module_imports(name: str) -> None:
    importlib.import_module(name)
