"""Lazy package exports (PEP 562): a package ``__init__`` names what it re-exports, and each
name's module is imported on first access. ``import dpone.dlq`` (which ``import
dpone.dlq.refs`` implies) therefore costs nothing until a caller needs the writer.

Written here rather than taken from ``lazy_loader``: it is these few lines, and every
``import dpone`` would import the dependency.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any


def exports(
    package: str, names: Mapping[str, str], submodules: Collection[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` re-exporting ``names`` (name -> the module
    that defines it) and its ``submodules``.

    A re-exported name must not be the name of one of the package's submodules: importing
    the submodule binds its name on the package, and the name would change meaning.
    """

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next access skips __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names) | set(submodules))

    return __getattr__, __dir__


__all__ = ["exports"]
