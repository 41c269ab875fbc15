"""The user code a manifest names, ``module:attr`` or ``module.attr``, found next to it first.

The one importer behind the python source's ``callable`` and the custom assertions'
``predicate`` (its static twin, which finds and parses without importing, is
``dpone.assertions.locate``). A module next to the manifest is loaded from its file under a
name unique to that file, so two manifests with their own ``quality.py`` in one process never
share the first one imported. The manifest's folder is on ``sys.path`` only while such a
module executes (it may import its neighbours at the top) and is taken off again: a run
leaves ``sys.path`` as it found it. A name not next to the manifest is imported normally.

Errors are :class:`UserCodeError`; each caller turns them into its own ``DPONE_*`` error.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

#: The prefix of the ``sys.modules`` name a module next to a manifest is loaded under.
MODULE_PREFIX = "_dpone_user_"

Failure = Literal["malformed", "import", "not_callable"]


class UserCodeError(Exception):
    """Why a reference gives no callable: ``failure`` says which way; ``cause`` is the type
    name of the exception the import raised (never its message, which may hold values)."""

    def __init__(self, reference: str, failure: Failure, cause: str | None = None) -> None:
        super().__init__(f"{reference}: {failure}" + (f" ({cause})" if cause else ""))
        self.reference = reference
        self.failure: Failure = failure
        self.cause = cause


def split_reference(reference: str) -> tuple[str, str]:
    """``module:attr`` or ``module.attr`` -> (module, attr); either part may come back empty."""
    module_name, sep, attr = reference.partition(":")
    if not sep:
        module_name, _, attr = reference.rpartition(".")
    return module_name, attr


def local_module_file(module_name: str, base_dir: Path) -> Path | None:
    """The file of ``module_name`` next to the manifest (a module or a package), if any."""
    relative = Path(*module_name.split("."))
    for candidate in (base_dir / relative.with_suffix(".py"), base_dir / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_near(module_name: str, base_dir: Path) -> ModuleType:
    """``module_name`` from the manifest's folder if it is there, else the installed one."""
    local = local_module_file(module_name, base_dir)
    if local is None:
        return importlib.import_module(module_name)
    digest = hashlib.sha256(str(local.resolve()).encode()).hexdigest()[:16]
    unique = f"{MODULE_PREFIX}{digest}"
    if unique in sys.modules:
        return sys.modules[unique]
    package = [str(local.parent)] if local.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(unique, local, submodule_search_locations=package)
    if spec is None or spec.loader is None:
        raise ImportError(module_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    folder = str(base_dir)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module


def load_callable(reference: str, base_dir: Path) -> Callable[..., Any]:
    """Import ``reference`` (see the module docstring) and return the callable it names."""
    module_name, attr = split_reference(reference)
    if not module_name or not attr:
        raise UserCodeError(reference, "malformed")
    try:
        target: Any = import_near(module_name, Path(base_dir).resolve())
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:  # user code can fail to import in any way: report it as data
        raise UserCodeError(reference, "import", type(exc).__name__) from None
    if not callable(target):
        raise UserCodeError(reference, "not_callable")
    return target  # type: ignore[no-any-return]
