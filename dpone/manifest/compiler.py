"""Manifest -> Plan: load (the only IO), schema validation, the ordered pure passes, the plan.

``compile_manifest`` is what ``dpone validate``, ``dpone plan`` and ``dpone run`` call.
Every problem is a :class:`ManifestError` listing all errors at once; nothing else escapes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rfc8785

from dpone.assertions.catalog import AssertionTypeInfo, Registered
from dpone.assertions.spec import AssertionSpec
from dpone.contracts.spec import ContractSpec, EvolutionSpec, TypeInferenceSpec
from dpone.dlq.policy import DlqPolicy
from dpone.errors import ErrorDetail, ManifestError
from dpone.manifest import dltblocks, passes
from dpone.manifest.loader import LoadedManifest, join_pointer, load_manifest, parse_manifest
from dpone.manifest.plan import (
    DaskPlan,
    Plan,
    QualityPlan,
    RuntimePlan,
    SinkPlan,
    SourcePlan,
    StrategyPlan,
)
from dpone.manifest.predicates import check_predicates
from dpone.manifest.salvage import salvaged
from dpone.manifest.specs import (
    DltSourceSpec,
    SinkPlace,
    SourceSpec,
    resolve_under,
    sink_spec,
    source_spec,
)
from dpone.manifest.validate import invalid_pointers, schema_errors


def fingerprint_of(document: Mapping[str, Any]) -> str:
    """``sha256:`` + hex SHA-256 of the RFC 8785 canonical JSON of the normalized document.

    Formatting, comments, key order, anchors and ``x-*`` annotations never reach the
    normalized document, and defaults are explicit in it, so only semantics change this.
    """
    return "sha256:" + hashlib.sha256(rfc8785.dumps(dict(document))).hexdigest()


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
    ctx = passes.CompileContext(
        manifest, assertion_types or Registered(), allow_any_import, invalid
    )
    try:
        for compile_pass in passes.PASSES:
            result = compile_pass(document, ctx)
            if isinstance(result, list):
                stages.append(result)
                break
            document = result
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        if not invalid:
            raise
        # A salvaged document a transforming pass cannot read: its schema errors say why.
    # Not a pure pass: predicate modules are found and parsed (never imported) to prove
    # they resolve.
    stages.append(passes.guarded(check_predicates, document, ctx))
    stages.append(passes.guarded(dltblocks.check_installed, document, ctx))
    problems = _once(stages)
    if problems:
        raise ManifestError.collect(problems, manifest.display_path)
    return build_plan(document, manifest)


def _once(stages: list[list[ErrorDetail]]) -> list[ErrorDetail]:
    """The stages' errors in position order, a pointer that an earlier stage reported
    already left out (a value the schema refused is not reported again by a later pass)."""
    seen: set[str | None] = set()
    found: list[ErrorDetail] = []
    for errors in stages:
        found += [e for e in errors if e.pointer not in seen]
        seen.update(e.pointer for e in errors)
    return sorted(found, key=lambda e: (e.line or 0, e.column or 0, e.code))


def build_plan(doc: dict[str, Any], manifest: LoadedManifest) -> Plan:
    """The typed plan of a normalized document (every default already in it)."""
    base = manifest.path.parent
    runtime = doc["runtime"]
    sink = doc["sink"]
    options = sink["options"]
    contract_doc = options["schema_contract"]
    contract = ContractSpec(
        enforcement=contract_doc["enforcement"],
        coercion=contract_doc["coercion"],
        columns=passes.column_specs(doc),
        evolution=EvolutionSpec(**contract_doc["evolution"]),
        type_inference=TypeInferenceSpec(**options["type_inference"]),
    )
    dlq_doc = dict(options["dlq"])
    dlq = DlqPolicy(**{**dlq_doc, "directory": str(resolve_under(base, dlq_doc["directory"]))})
    return Plan(
        name=doc["name"],
        environment=doc["environment"],
        description=doc.get("description"),
        manifest_path=manifest.path,
        manifest_dir=base,
        runtime=RuntimePlan(
            work_dir=resolve_under(base, runtime["work_dir"]),
            chunk_size=runtime["chunk_size"],
            max_columns=runtime["max_columns"],
            engine=runtime["engine"],
            dask=DaskPlan(
                address=runtime["dask"].get("address"),
                n_workers=runtime["dask"].get("n_workers"),
                memory_limit=runtime["dask"].get("memory_limit"),
            ),
        ),
        source=SourcePlan(spec=_source_spec(doc["source"], base, contract, runtime["max_columns"])),
        sink=SinkPlan(
            spec=sink_spec(
                sink, SinkPlace(base, doc["name"], resolve_under(base, runtime["work_dir"]))
            ),
            strategy=StrategyPlan(
                mode=sink["strategy"]["mode"],
                unique_key=tuple(sink["strategy"].get("unique_key", ())),
            ),
            contract=contract,
            dlq=dlq,
            evidence_dir=resolve_under(base, options["runtime_evidence"]["output_dir"]),
        ),
        quality=_quality(doc),
        state_type=doc["state"]["type"],
        observability=doc["observability"],
        document=doc,
        fingerprint=fingerprint_of(doc),
    )


def _quality(doc: dict[str, Any]) -> QualityPlan:
    assertions = doc["quality"]["assertions"]
    default = assertions["on_failure"]
    specs = []
    for key, value in assertions.items():
        if key in passes.RESERVED_ASSERTION_KEYS:
            continue
        params = {k: v for k, v in value.items() if k != "on_failure"}
        specs.append(
            AssertionSpec(
                type=key,
                params=params,
                on_failure=value.get("on_failure", default),
                pointer=join_pointer(passes.ASSERTIONS, key),
                name=key,
            )
        )
    for i, entry in enumerate(assertions["custom"]):
        params = {k: v for k, v in entry.items() if k != "on_failure"}
        specs.append(
            AssertionSpec(
                type="custom",
                params=params,
                on_failure=entry.get("on_failure", default),
                pointer=f"{passes.ASSERTIONS}/custom/{i}",
                name=entry.get("name") or f"custom:{entry['predicate']}",
            )
        )
    return QualityPlan(on_failure=default, assertions=tuple(specs))


def _source_spec(
    section: dict[str, Any], base: Path, contract: ContractSpec, max_columns: int
) -> SourceSpec:
    """The source's spec; a dlt source also gets the contract's cursor column (its type
    turns the committed cursor into dlt's incremental start value), a file source the
    column cap (its reader stops at a header that wide, before parsing any row)."""
    spec = source_spec(section, base, max_columns=max_columns)
    if isinstance(spec, DltSourceSpec) and spec.incremental is not None:
        spec = dataclasses.replace(spec, cursor=contract.column(spec.incremental.cursor_column))
    return spec
