"""The typed plan of a normalized document: the compiler's last step, after every pass and
check succeeded (every default is in the document by then)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rfc8785

from dpone.assertions.spec import AssertionSpec
from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.spec import ColumnSpec, ContractSpec, EvolutionSpec, TypeInferenceSpec
from dpone.errors import ErrorDetail
from dpone.manifest.context import (
    ASSERTIONS,
    RESERVED_ASSERTION_KEYS,
    Document,
    contract_columns,
)
from dpone.manifest.loader import LoadedManifest
from dpone.manifest.plan import (
    DaskPlan,
    Plan,
    QualityPlan,
    RuntimePlan,
    SinkPlan,
    SourcePlan,
    StrategyPlan,
)
from dpone.manifest.pointers import join_pointer
from dpone.manifest.specs import (
    DltSourceSpec,
    SinkPlace,
    SourceSpec,
    resolve_under,
    sink_spec,
    source_spec,
)


def fingerprint_of(document: Mapping[str, Any]) -> str:
    """``sha256:`` + hex SHA-256 of the RFC 8785 canonical JSON of the normalized document.

    Formatting, comments, key order, anchors and ``x-*`` annotations never reach the
    normalized document, and defaults are explicit in it, so only semantics change this.
    """
    return "sha256:" + hashlib.sha256(rfc8785.dumps(dict(document))).hexdigest()


def build_plan(
    doc: dict[str, Any], manifest: LoadedManifest, warnings: tuple[ErrorDetail, ...]
) -> Plan:
    """The typed plan of a normalized document (every default already in it); ``warnings``:
    the compiler's about the document as written."""
    base = manifest.path.parent
    runtime = doc["runtime"]
    sink = doc["sink"]
    options = sink["options"]
    contract_doc = options["schema_contract"]
    contract = ContractSpec(
        enforcement=contract_doc["enforcement"],
        coercion=contract_doc["coercion"],
        columns=column_specs(doc),
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
            strategy=_strategy(sink["strategy"]),
            contract=contract,
            dlq=dlq,
            evidence_dir=resolve_under(base, options["runtime_evidence"]["output_dir"]),
            load_columns=tuple(options.get("load_columns", ())),
            system_tables=options["system_tables"],
        ),
        quality=_quality(doc),
        state_type=doc["state"]["type"],
        observability=doc["observability"],
        document=doc,
        fingerprint=fingerprint_of(doc),
        quarantine_export=(
            resolve_under(base, doc["quarantine"]["dir"]) if "quarantine" in doc else None
        ),
        warnings=warnings,
    )


def _strategy(strategy: dict[str, Any]) -> StrategyPlan:
    return StrategyPlan(
        mode=strategy["mode"],
        unique_key=tuple(strategy.get("unique_key", ())),
        merge_strategy=strategy.get("merge_strategy"),
        merge_key=tuple(strategy.get("merge_key", ())),
        deleted_column=strategy.get("deleted_column"),
        boundary_timestamp=strategy.get("boundary_timestamp"),
    )


def _quality(doc: dict[str, Any]) -> QualityPlan:
    assertions = doc["quality"]["assertions"]
    default = assertions["on_failure"]
    specs = []
    for key, value in assertions.items():
        if key in RESERVED_ASSERTION_KEYS:
            continue
        params = {k: v for k, v in value.items() if k != "on_failure"}
        specs.append(
            AssertionSpec(
                type=key,
                params=params,
                on_failure=value.get("on_failure", default),
                pointer=join_pointer(ASSERTIONS, key),
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
                pointer=f"{ASSERTIONS}/custom/{i}",
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


def column_specs(doc: Document) -> tuple[ColumnSpec, ...]:
    return tuple(
        ColumnSpec(
            name=name,
            type=spec["type"],
            nullable=spec["nullable"],
            precision=spec.get("precision"),
            scale=spec.get("scale"),
            timezone=spec.get("timezone"),
            source=spec.get("source"),
        )
        for name, spec in contract_columns(doc).items()
    )
