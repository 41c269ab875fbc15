"""The passes that transform the document: annotations dropped, defaults made explicit,
shorthands written out. Each returns a new document and never reports an error (the schema
and the checks do)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dpone.manifest import defaults
from dpone.manifest.context import (
    EVOLUTION_KEYS,
    LEGACY_QUARANTINE,
    RESERVED_ASSERTION_KEYS,
    CompileContext,
    Document,
    PassResult,
)
from dpone.manifest.schema import MANIFEST_SCHEMA
from dpone.published import load_schema, matches


def drop_extensions(doc: Document, ctx: CompileContext) -> PassResult:
    """``x-*`` keys are the user's annotations: accepted anywhere, ignored everywhere."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.startswith("x-")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    result: Document = strip(doc)
    return result


def map_legacy_keys(doc: Document, ctx: CompileContext) -> PassResult:
    """The legacy ``quarantine.dir`` names the DLQ's folder when ``sink.options.dlq.directory``
    is not written: the rejected rows stay where the legacy manifest kept them, and moving the
    value to its replacement (the deprecation warning's fix) changes nothing on disk.

    Before the defaults: the default DLQ folder is only for a manifest that names none. The
    ``quarantine`` section itself stays (it is the raw export's folder, in the fingerprint).
    """
    legacy = doc.get(LEGACY_QUARANTINE[1:])
    if not isinstance(legacy, dict) or not isinstance(legacy.get("dir"), str):
        return doc
    doc = copy.deepcopy(doc)
    sink = doc.get("sink")
    if not isinstance(sink, dict):
        return doc  # the schema reports it
    options = sink.setdefault("options", {})
    dlq = options.setdefault("dlq", {}) if isinstance(options, dict) else None
    if isinstance(dlq, dict) and "directory" not in dlq:
        dlq["directory"] = legacy["dir"]
    return doc


def map_dlt_merge_key(doc: Document, ctx: CompileContext) -> PassResult:
    """The dlt sink's earlier ``sink.merge_key`` is ``sink.strategy.merge_key`` with
    ``merge_strategy: delete-insert``: what dlt did with it (its merge by ``merge_key``).
    Written beside the new keys, the new ones win and the strategy checks report any clash."""
    sink = doc.get("sink")
    if not isinstance(sink, dict) or "merge_key" not in sink:
        return doc
    doc = copy.deepcopy(doc)
    sink = doc["sink"]
    merge_key = sink.pop("merge_key")
    strategy = sink.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("merge_key", merge_key)
        if strategy.get("mode") == "merge":
            strategy.setdefault("merge_strategy", "delete-insert")
    return doc


def normalize_shorthands(doc: Document, ctx: CompileContext) -> PassResult:
    """One-word ``evolution`` becomes the three-key form; assertion values take table form."""
    doc = copy.deepcopy(doc)
    contract = doc.get("sink", {}).get("options", {}).get("schema_contract")
    if contract is not None and isinstance(contract.get("evolution"), str):
        word = contract["evolution"]
        contract["evolution"] = dict.fromkeys(EVOLUTION_KEYS, word)
    assertions = doc.get("quality", {}).get("assertions")
    if assertions:
        for key, value in list(assertions.items()):
            if key in RESERVED_ASSERTION_KEYS:
                continue
            if not (isinstance(value, dict) and "value" in value):
                assertions[key] = {"value": value}
    return doc


def apply_defaults(doc: Document, ctx: CompileContext) -> PassResult:
    """Every default made explicit, so the plan and its fingerprint are complete.

    The defaults are the JSON Schema's (``dpone.manifest.defaults``): nothing here restates one.
    """
    return defaults.apply_defaults(doc, load_schema(MANIFEST_SCHEMA), _matches)


def _matches(subschema: Mapping[str, Any], value: Any) -> bool:
    return matches(MANIFEST_SCHEMA, subschema, value)
