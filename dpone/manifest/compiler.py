"""Manifest -> Plan: load (the only IO), schema validation, the ordered pure passes, the plan.

``compile_manifest`` is what ``dpone validate``, ``dpone plan`` and ``dpone run`` call.
Every problem is a :class:`ManifestError` listing all errors at once; nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.assertions.catalog import AssertionTypeInfo, Registered
from dpone.errors import ErrorDetail, ManifestError
from dpone.manifest.build import build_plan
from dpone.manifest.context import CompileContext, guarded
from dpone.manifest.loader import LoadedManifest, load_manifest, parse_manifest
from dpone.manifest.passes import AFTER_PASSES, PASSES, WARNINGS
from dpone.manifest.plan import Plan
from dpone.manifest.salvage import salvaged
from dpone.manifest.schema import invalid_pointers, schema_errors


def compile_manifest(
    path: str | Path,
    *,
    assertion_types: Mapping[str, AssertionTypeInfo] | None = None,
    allow_any_import: bool = False,
) -> Plan:
    """Compile the manifest at ``path``; ``allow_any_import`` lets predicates name any
    installed module (found and parsed, still never imported here)."""
    return compile_loaded(
        load_manifest(path), assertion_types=assertion_types, allow_any_import=allow_any_import
    )


def compile_text(
    text: str,
    *,
    path: str | Path = "manifest.yaml",
    assertion_types: Mapping[str, AssertionTypeInfo] | None = None,
    allow_any_import: bool = False,
) -> Plan:
    """Compile manifest text as if it were the file at ``path`` (which need not exist)."""
    p = Path(path)
    loaded = parse_manifest(text, path=p.resolve(), display_path=str(path))
    return compile_loaded(
        loaded, assertion_types=assertion_types, allow_any_import=allow_any_import
    )


def compile_loaded(
    manifest: LoadedManifest,
    *,
    assertion_types: Mapping[str, AssertionTypeInfo] | None = None,
    allow_any_import: bool = False,
) -> Plan:
    # Every error at once (SPEC §2): after schema errors the passes still run on the parts
    # of the document the errors leave readable (dpone.manifest.salvage).
    stages: list[list[ErrorDetail]] = [schema_errors(manifest)]
    document: dict[str, Any] = manifest.document
    invalid: frozenset[str] = frozenset()
    if stages[0]:
        refused, unknown = invalid_pointers(manifest)
        invalid = frozenset(refused)
        salvage = salvaged(manifest.document, refused | unknown)
        if salvage is None:  # the document itself is refused: nothing of it is readable
            raise ManifestError.collect(stages[0], manifest.display_path)
        document = salvage
    ctx = CompileContext(manifest, assertion_types or Registered(), allow_any_import, invalid)
    warnings = tuple(w for check in WARNINGS for w in guarded(check, manifest.document, ctx))
    try:
        for compile_pass in PASSES:
            result = compile_pass(document, ctx)
            if isinstance(result, list):
                stages.append(result)
                break
            document = result
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        if not invalid:
            raise
        # A salvaged document a transforming pass cannot read: its schema errors say why.
    stages.extend(guarded(check, document, ctx) for check in AFTER_PASSES)
    problems = _once(stages)
    if problems:
        error = ManifestError.collect(problems, manifest.display_path)
        error.warnings = warnings
        raise error
    return build_plan(document, manifest, warnings)


def _once(stages: list[list[ErrorDetail]]) -> list[ErrorDetail]:
    """The stages' errors in position order, a pointer that an earlier stage reported
    already left out (a value the schema refused is not reported again by a later pass)."""
    seen: set[str | None] = set()
    found: list[ErrorDetail] = []
    for errors in stages:
        found += [e for e in errors if e.pointer not in seen]
        seen.update(e.pointer for e in errors)
    return sorted(found, key=lambda e: (e.line or 0, e.column or 0, e.code))
