"""The compiler's ordered, pure passes over a manifest document: schema-valid, or what its
schema errors leave readable (``dpone.manifest.salvage``; ``STATIC_INPUTS`` says which checks
still run then).

Size (over 500 lines): one short function per pass; they form one ordered list and read top to
bottom.

Each pass takes the document and the compile context and returns a richer document or a
list of errors (sqlglot's optimizer RULES are the model). The runner in ``compiler.py``
stops at the first pass that reports errors: later passes may rely on earlier ones (the
static checks form one pass, every one of them reported at once).
No pass touches files or the environment.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dpone.assertions.catalog import AssertionTypeInfo
from dpone.contracts.spec import ColumnSpec
from dpone.dlq import policy as dlq_limits
from dpone.errors import ErrorDetail
from dpone.manifest import defaults, dltblocks, paths, storage
from dpone.manifest.colnames import check_column_names
from dpone.manifest.dltsink import check_dlt_sink
from dpone.manifest.engine_checks import check_engine
from dpone.manifest.loader import LoadedManifest, join_pointer
from dpone.manifest.salvage import touches
from dpone.manifest.secrets import inline_secret, malformed_reference
from dpone.manifest.validate import MANIFEST_SCHEMA, locate
from dpone.published import load_schema, validator
from dpone.sourcepaths import source_path_problem

Document = dict[str, Any]
PassResult = Document | list[ErrorDetail]

EVOLUTION_KEYS = ("tables", "columns", "data_type")
RESERVED_ASSERTION_KEYS = ("on_failure", "custom")
UNORDERABLE_CURSOR_TYPES = ("boolean", "json", "binary")
#: Cursor types ``lag`` can be subtracted from (seconds, days, units).
LAG_CURSOR_TYPES = ("timestamp", "date", "integer", "bigint", "float", "decimal")


@dataclass(frozen=True, slots=True)
class CompileContext:
    manifest: LoadedManifest
    assertion_types: Mapping[str, AssertionTypeInfo]
    allow_any_import: bool = False
    #: pointers of values the schema refused (or required keys missing): the passes run on
    #: the rest of the document (``dpone.manifest.salvage``)
    invalid: frozenset[str] = frozenset()

    def error(
        self,
        code: str,
        message: str,
        pointer: str,
        *,
        at_key: bool = False,
        fixes: tuple[str, ...] = (),
    ) -> ErrorDetail:
        line, column = locate(self.manifest, pointer, at_key=at_key)
        return ErrorDetail(
            code=code,
            message=message,
            stage="compile",
            pointer=pointer,
            path=self.manifest.display_path,
            line=line,
            column=column,
            fixes=fixes,
        )


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
    return bool(validator(MANIFEST_SCHEMA).evolve(schema=subschema).is_valid(value))


def check_static(doc: Document, ctx: CompileContext) -> PassResult:
    """The checks of SPEC §2 that the schema cannot express; every one reported at once."""
    errors: list[ErrorDetail] = []
    for check in STATIC_CHECKS:
        if not ctx.invalid:
            errors.extend(check(doc, ctx))
        elif not touches(ctx.invalid, STATIC_INPUTS[check]):
            errors.extend(guarded(check, doc, ctx))
    errors.sort(key=lambda e: (e.line or 0, e.column or 0, e.code))
    return errors or doc


# --- static checks --------------------------------------------------------------------------

Check = Callable[[Document, CompileContext], list[ErrorDetail]]
SINK = "/sink"
CONTRACT = "/sink/options/schema_contract"
DLQ = "/sink/options/dlq"
ASSERTIONS = "/quality/assertions"


def _contract_columns(doc: Document) -> dict[str, Any]:
    columns: dict[str, Any] = doc["sink"]["options"]["schema_contract"]["columns"]
    return columns


def check_strategy(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    strategy = doc["sink"]["strategy"]
    errors = []
    unique_key = strategy.get("unique_key", [])
    if strategy["mode"] == "merge" and not unique_key:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_WITHOUT_KEY",
                "strategy mode merge needs a unique_key to match rows on",
                f"{SINK}/strategy/mode",
                fixes=("add `unique_key: [id]` (the columns that identify a row)",),
            )
        )
    if strategy["mode"] == "append" and _enforcement(doc) == "coerce":
        # coerce holds the state when it rejects rows, so the next run reads the same rows
        # again: every source dpone reads gives them again, and append would load each row
        # that loaded this time a second time (SPEC §3).
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_COERCE_APPEND",
                "enforcement coerce re-reads every row after a run that rejected one (the "
                "state is held), so strategy mode append would load rows twice",
                f"{SINK}/strategy/mode",
                fixes=(
                    "use `mode: merge` with a `unique_key`: a re-read row replaces itself",
                    "or use enforcement: quarantine: the state advances and the rejected rows "
                    "wait in the DLQ",
                ),
            )
        )
    columns = _contract_columns(doc)
    if columns:
        for i, column in enumerate(unique_key):
            if column not in columns:
                errors.append(
                    ctx.error(
                        "DPONE_MANIFEST_UNIQUE_KEY_COLUMN",
                        f"unique_key column '{column}' is not declared in the contract",
                        f"{SINK}/strategy/unique_key/{i}",
                        fixes=(f"declare '{column}' under schema_contract.columns",),
                    )
                )
    return errors


def _enforcement(doc: Document) -> str:
    return str(doc["sink"]["options"]["schema_contract"]["enforcement"])


def check_contract(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    errors = []
    contract = doc["sink"]["options"]["schema_contract"]
    if contract["enforcement"] == "coerce" and contract["coercion"] == "none":
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_COERCION",
                "enforcement coerce always applies the safe coercions; coercion: none contradicts "
                "it",
                f"{CONTRACT}/coercion",
                fixes=(
                    "remove `coercion: none`",
                    "or use enforcement: strict for canonical values only",
                ),
            )
        )
    for name, spec in _contract_columns(doc).items():
        pointer = join_pointer(f"{CONTRACT}/columns", name)
        if spec["type"] == "decimal" and spec.get("scale", 0) > spec["precision"]:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_DECIMAL_SCALE",
                    f"column '{name}': scale {spec['scale']} exceeds precision {spec['precision']}",
                    f"{pointer}/scale",
                    fixes=("use a scale between 0 and the precision",),
                )
            )
    return errors


def check_dlq(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    dlq = doc["sink"]["options"]["dlq"]
    errors = []
    needs = _dead_letter_uses(doc) if not dlq["enabled"] else []
    if needs:
        what, fix = needs[0]
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_DLQ_DISABLED",
                f"the DLQ cannot be disabled while {what} sends rows to it",
                f"{DLQ}/enabled",
                fixes=("remove `enabled: false`", fix),
            )
        )
    if dlq["pii_policy"] == "preserve" and dlq_limits.is_production(doc["environment"]):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_PII_PRESERVE_IN_PRODUCTION",
                "pii_policy preserve keeps row values and is refused in production",
                f"{DLQ}/pii_policy",
                fixes=("use reference_only (the default) or masked",),
            )
        )
    for name, (_, low, high) in dlq_limits.LIMITS.items():
        value = dlq[name]
        if not low <= value <= high:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_DLQ_LIMIT",
                    f"dlq.{name} must be between {low} and {high}",
                    f"{DLQ}/{name}",
                    fixes=(f"use a value in {low}..{high}",),
                )
            )
    if dlq["max_diagnostic_bytes"] > dlq["max_record_bytes"]:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_DLQ_LIMIT",
                "dlq.max_diagnostic_bytes must not exceed dlq.max_record_bytes",
                f"{DLQ}/max_diagnostic_bytes",
                fixes=("lower max_diagnostic_bytes or raise max_record_bytes",),
            )
        )
    return errors


def _dead_letter_uses(doc: Document) -> list[tuple[str, str]]:
    """What in the manifest may send a row to the DLQ (SPEC §5: then it cannot be disabled)."""
    options = doc["sink"]["options"]
    contract = options["schema_contract"]
    uses: list[tuple[str, str]] = []
    if contract["enforcement"] == "quarantine":
        uses.append(("enforcement quarantine", "or choose another enforcement mode"))
    elif contract["enforcement"] == "warn":
        # warn loads NULL but these ask for the DLQ by name. (strict fails on a rejected row;
        # coerce's rejects, and warn's NOT NULL ones, are counted when the DLQ is disabled.)
        if options["type_inference"]["conflict_policy"] == "quarantine":
            uses.append(("type_inference.conflict_policy quarantine", "or use fail"))
        if "discard_row" in contract["evolution"].values():
            uses.append(("evolution discard_row", "or use discard_value"))
    assertions = doc["quality"]["assertions"]
    default = assertions["on_failure"]
    for key, value in assertions.items():
        if key == "on_failure":
            continue
        entries = value if key == "custom" else [value]
        for entry in entries:
            if isinstance(entry, dict) and entry.get("on_failure", default) == "quarantine":
                name = entry.get("name") or entry.get("predicate") if key == "custom" else key
                uses.append((f"assertion '{name}' (on_failure quarantine)", "or use fail or warn"))
    return uses


def check_incremental(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    incremental = doc["source"].get("incremental")
    columns = _contract_columns(doc)
    if not incremental or not columns:
        return []
    name = incremental["cursor_column"]
    pointer = "/source/incremental/cursor_column"
    if name not in columns:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_COLUMN",
                f"cursor column '{name}' is not declared in the contract",
                pointer,
                fixes=(f"declare '{name}' under schema_contract.columns with an orderable type",),
            )
        ]
    if columns[name]["type"] in UNORDERABLE_CURSOR_TYPES:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_COLUMN",
                f"cursor column '{name}' has type {columns[name]['type']}, which has no order",
                pointer,
                fixes=("use a timestamp, date, integer, decimal or string cursor",),
            )
        ]
    if incremental.get("lag") and columns[name]["type"] not in LAG_CURSOR_TYPES:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_LAG",
                f"lag needs a cursor with arithmetic; '{name}' has type {columns[name]['type']}",
                "/source/incremental/lag",
                fixes=(
                    "remove lag, or use a timestamp (lag in seconds), date (days) or number cursor",
                ),
            )
        ]
    return []


_CONNECTION_POINTERS = ("/source/connection", "/sink/connection", "/sink/credentials")


def check_secrets(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    errors = []
    sections = {"/source": doc["source"], "/sink": doc["sink"]}
    for pointer in _CONNECTION_POINTERS:
        section = sections[pointer.rsplit("/", 1)[0]]
        value = section.get(pointer.rsplit("/", 1)[1])
        if not isinstance(value, str):
            continue
        if malformed_reference(value):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SECRET_REFERENCE",
                    "malformed ${ENV_VAR} reference in the connection string",
                    pointer,
                    fixes=("write references as ${NAME} with letters, digits and underscores",),
                )
            )
        elif inline_secret(value):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_INLINE_SECRET",
                    "the connection string holds a credential; secrets never live in a manifest",
                    pointer,
                    fixes=(
                        "move the credential to an environment variable and write ${NAME}",
                        'e.g. connection: "${DPONE_PG_URL}"',
                    ),
                )
            )
    allowed = (*_CONNECTION_POINTERS, storage.STORAGE, *dltblocks.reference_roots(doc))
    errors.extend(_stray_references(doc, "", ctx, allowed))
    return errors


def _stray_references(
    value: Any, pointer: str, ctx: CompileContext, allowed: tuple[str, ...]
) -> list[ErrorDetail]:
    """``${...}`` outside a connection string (or a dlt source's credentials, checked by
    ``dltblocks``, or ``source.options.storage``, checked by ``storage``) would silently stay
    literal: say so instead."""
    if pointer in allowed:
        return []
    if isinstance(value, dict):
        return [
            e
            for k, v in value.items()
            for e in _stray_references(v, join_pointer(pointer, k), ctx, allowed)
        ]
    if isinstance(value, list):
        return [
            e
            for i, v in enumerate(value)
            for e in _stray_references(v, join_pointer(pointer, i), ctx, allowed)
        ]
    if isinstance(value, str) and "${" in value:
        return [
            ctx.error(
                "DPONE_MANIFEST_SECRET_REFERENCE",
                "${...} references are resolved only in connection strings and "
                "source.options.storage",
                pointer,
                fixes=("write the value itself here, or move it into a connection string",),
            )
        ]
    return []


def check_assertions(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    assertions = doc["quality"]["assertions"]
    columns = _contract_columns(doc)
    errors = []
    for key, value in assertions.items():
        if key in RESERVED_ASSERTION_KEYS:
            continue
        pointer = join_pointer(ASSERTIONS, key)
        info = ctx.assertion_types.get(key)
        if info is None:
            registered = ", ".join(sorted(ctx.assertion_types)) or "none"
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_UNKNOWN_TYPE",
                    f"unknown assertion type '{key}'; registered: {registered}",
                    pointer,
                    at_key=True,
                    fixes=(
                        "use a registered type, or install one under the 'dpone.assertion' "
                        "entry-point group (see `dpone plugins list`)",
                    ),
                )
            )
            continue
        policy = value.get("on_failure")
        if info.scope == "batch" and policy == "quarantine":
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_QUARANTINE_BATCH",
                    f"assertion '{key}' is batch-scoped: there are no rows to quarantine when "
                    "it fails",
                    f"{pointer}/on_failure",
                    fixes=("use fail or warn for a batch-scoped assertion",),
                )
            )
        elif info.scope == "batch" and policy is None and assertions["on_failure"] == "quarantine":
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_QUARANTINE_BATCH",
                    f"assertion '{key}' is batch-scoped and would inherit on_failure: "
                    "quarantine from the pipeline",
                    pointer,
                    at_key=True,
                    fixes=(f"give '{key}' its own on_failure: fail or warn",),
                )
            )
        problems = info.check_config({k: v for k, v in value.items() if k != "on_failure"})
        if problems:
            errors.extend(
                ctx.error(
                    "DPONE_ASSERTION_CONFIG",
                    problem,
                    _value_pointer(ctx, pointer),
                    fixes=(f"see `dpone plugins list` for what '{key}' takes",),
                )
                for problem in problems
            )
        elif info.value == "columns":
            errors.extend(_assertion_value(key, value["value"], pointer, columns, ctx))
    return errors


def _value_pointer(ctx: CompileContext, pointer: str) -> str:
    return f"{pointer}/value" if ctx.manifest.mark(f"{pointer}/value") else pointer


def _assertion_value(
    key: str, value: list[str], pointer: str, columns: Mapping[str, Any], ctx: CompileContext
) -> list[ErrorDetail]:
    """Columns named by an assertion must be declared (when the contract declares any)."""
    base = _value_pointer(ctx, pointer)
    if not columns:
        return []
    return [
        ctx.error(
            "DPONE_ASSERTION_UNKNOWN_COLUMN",
            f"assertion '{key}' names column '{column}', which the contract does not declare",
            f"{base}/{i}",
            fixes=(f"declare '{column}' under schema_contract.columns, or fix the name",),
        )
        for i, column in enumerate(value)
        if column not in columns
    ]


def check_source(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """What a file source's reader would refuse at run time, refused here first: the path's
    form (a path that matches no file is a run-time matter, DPONE_SOURCE_NO_FILES) and the
    text encodings and quoting of its options."""
    source = doc["source"]
    if source.get("type") != "file":
        return []
    errors = []
    problem = source_path_problem(source["path"])
    # A NUL byte is reported once, for every manifest value, by paths.check_nul_bytes.
    if problem is not None and "\x00" not in str(source["path"]):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_PATH",
                f"source path {problem}",
                "/source/path",
                fixes=(
                    "write a path relative to the manifest's folder (data/*.csv, ../shared/*.csv)"
                    ", an absolute one (/data/landing/*.csv), one under ~/, or an object store "
                    "URI (s3://bucket/prefix/*.csv, gs://..., az://...)",
                ),
            )
        )
    options = source.get("options", {})
    for fmt in ("csv", "jsonl"):
        encoding = options.get(fmt, {}).get("encoding")
        if encoding is not None and not _is_codec(encoding):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SOURCE_OPTION",
                    f"encoding '{encoding}' is not a known text encoding",
                    f"/source/options/{fmt}/encoding",
                    fixes=("use a Python codec name such as utf-8, latin-1 or cp1252",),
                )
            )
    csv = options.get("csv", {})
    if csv.get("quote_char") is not None and csv.get("quote_char") == csv.get("delimiter", ","):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "csv quote_char and delimiter must differ",
                "/source/options/csv/quote_char",
                fixes=("choose another quote_char or delimiter",),
            )
        )
    for key in ("delimiter", "quote_char"):
        if csv.get(key) in ("\n", "\r"):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SOURCE_OPTION",
                    f"csv {key} cannot be a line break",
                    f"/source/options/csv/{key}",
                    fixes=("use a printable character such as , ; | or a tab",),
                )
            )
    return errors


def _is_codec(name: str) -> bool:
    try:
        "".encode(name)  # a text encoding, not only a codec (rot13 and hex are refused)
    except LookupError:
        return False
    return True


STATIC_CHECKS: tuple[Check, ...] = (
    check_source,
    storage.check_storage,
    paths.check_nul_bytes,
    paths.check_dlq_directory,
    check_strategy,
    check_dlt_sink,
    check_contract,
    check_column_names,
    check_dlq,
    check_incremental,
    check_secrets,
    dltblocks.check_dlt_source,
    check_assertions,
    check_engine,
)

#: What each check reads (JSON pointers): it runs after schema errors only when none of them
#: lies in or above these; () = any salvaged document (it walks every value it meets).
STATIC_INPUTS: dict[Check, tuple[str, ...]] = {
    check_source: ("/source",),
    storage.check_storage: ("/source",),
    paths.check_nul_bytes: (),
    paths.check_dlq_directory: ("/runtime/work_dir", DLQ, "/sink/options/runtime_evidence"),
    check_strategy: ("/sink/strategy", f"{CONTRACT}/columns"),
    check_dlt_sink: ("/sink",),
    check_contract: (CONTRACT,),
    check_column_names: (f"{CONTRACT}/columns", "/source"),
    check_dlq: ("/sink/options", ASSERTIONS, "/environment"),
    check_incremental: ("/source/incremental", f"{CONTRACT}/columns"),
    check_secrets: (),
    dltblocks.check_dlt_source: ("/source",),
    check_assertions: (ASSERTIONS, f"{CONTRACT}/columns"),
    check_engine: (
        "/source/partitions",
        "/source/partition_column",
        "/runtime/engine",
        f"{ASSERTIONS}/unique_columns",
    ),
}


def guarded(check: Check, doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """``check`` over a salvaged document: one that trips over a part the salvage removed
    (a required key of a section it does not name) reports nothing rather than crash; the
    schema error about that part is reported already."""
    try:
        return check(doc, ctx)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        return []


Pass = Callable[[Document, CompileContext], PassResult]

#: The compiler, in order. Each pass is pure; ``compiler.compile_loaded`` runs them.
PASSES: tuple[Pass, ...] = (
    drop_extensions,
    apply_defaults,  # before the shorthands: `evolution` defaults to the one word `evolve`
    normalize_shorthands,
    check_static,
)


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
        for name, spec in _contract_columns(doc).items()
    )
