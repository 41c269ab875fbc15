"""Every default has one home, the manifest schema's ``default`` (or ``x-dpone-default``).

The schema is walked for every default it declares; manifests that leave each one out are
compiled, and the compiler must have filled it, in the normalized document and in the typed
plan, with exactly the schema's value. Nothing downstream may default a manifest value again:
the plan's specs have no field defaults and no connector signature defaults a manifest key.
The library's own dataclasses (the DLQ policy, the contract, a load) keep defaults for
callers outside the compiler (``DlqStore(root)``, ``dpone.testing``); each is the schema's.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from dpone.connectors import base as connector_base
from dpone.connectors.base import LoadSpec, Partition, Partitioning, SourceChunk, TableDefinition
from dpone.connectors.sinks import SINKS, make_sink
from dpone.connectors.sinks.duckdb import DuckDbSink
from dpone.connectors.sinks.filesystem import FilesystemSink
from dpone.connectors.sinks.postgres import PostgresSink
from dpone.connectors.sources import SOURCES, make_source
from dpone.connectors.sources.duckdb import DuckDbSource
from dpone.connectors.sources.file import FileSource
from dpone.connectors.sources.postgres import PostgresSource
from dpone.connectors.sources.python import PythonSource
from dpone.connectors.sources.sqlite import SqliteSource
from dpone.contracts import dlq as dlq_policy
from dpone.contracts import spec as contract_spec
from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.spec import ColumnSpec, ContractSpec, EvolutionSpec, TypeInferenceSpec
from dpone.manifest import plan as plan_module
from dpone.manifest import specs
from dpone.manifest.compiler import compile_loaded
from dpone.manifest.context import EVOLUTION_KEYS
from dpone.manifest.defaults import TEMPLATE
from dpone.manifest.loader import parse_manifest
from dpone.manifest.plan import Plan
from dpone.manifest.specs import common as spec_common
from dpone.manifest.specs import sinks as spec_sinks
from dpone.manifest.specs import sources as spec_sources
from dpone.published import load_schema

SCHEMA = load_schema("dpone.manifest.v1")


@dataclass(frozen=True)
class Default:
    """A default of the schema at ``pointer`` (``*``: any key of a map, ``-``: any item)."""

    pointer: str
    value: Any
    template: str | None
    structural: bool  # an object default ({}) that exists to carry its members' defaults
    #: The if/then/else branches on the way: (pointer of the object, the ``if``, taken?)
    conditions: tuple[tuple[str, dict[str, Any], bool], ...]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    found: Any = SCHEMA
    for part in ref[2:].split("/"):
        found = found[part]
    resolved: dict[str, Any] = found
    return resolved


def schema_defaults(
    node: Any, pointer: str = "", conditions: tuple[Any, ...] = ()
) -> Iterator[Default]:
    if not isinstance(node, dict):
        return
    if "$ref" in node:
        yield from schema_defaults(_resolve(node), pointer, conditions)
    for name, sub in node.get("properties", {}).items():
        at = f"{pointer}/{name}"
        for candidate in (sub, _resolve(sub)):
            if "default" in candidate or TEMPLATE in candidate:
                yield Default(
                    at,
                    candidate.get("default"),
                    candidate.get(TEMPLATE),
                    candidate.get("default") == {}
                    and ("properties" in candidate or "properties" in _resolve(candidate)),
                    conditions,
                )
                break
        yield from schema_defaults(sub, at, conditions)
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_defaults(node["additionalProperties"], f"{pointer}/*", conditions)
    if isinstance(node.get("items"), dict):
        yield from schema_defaults(node["items"], f"{pointer}/-", conditions)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(keyword, ()):
            yield from schema_defaults(sub, pointer, conditions)
    for branch, taken in (("then", True), ("else", False)):
        if branch in node:
            condition = (pointer, node["if"], taken)
            yield from schema_defaults(node[branch], pointer, (*conditions, condition))


DEFAULTS = list(schema_defaults(SCHEMA))

# --- manifests that leave every default to the compiler ---------------------------------------

COLUMNS = """\
      columns:
        n: {type: string}
        d: {type: decimal, precision: 10}
        t: {type: timestamp}
        tm: {type: time}
"""
VARIANTS = {
    "csv_duckdb": f"""\
name: v_csv
source: {{type: file, format: csv, path: data/*.csv, incremental: {{cursor_column: t}}}}
sink:
  type: duckdb
  table: orders
  options:
    schema_contract:
{COLUMNS}quality:
  assertions:
    custom:
      - {{predicate: "rules:ok"}}
observability:
  openlineage: {{transport: {{type: console}}}}
""",
    "jsonl_filesystem_coerce": """\
name: v_jsonl
source: {type: file, format: jsonl, path: data/*.jsonl}
sink:
  type: filesystem
  path: lake
  table: orders
  strategy: {mode: replace}
  options:
    schema_contract: {enforcement: coerce, evolution: {tables: freeze}}
""",
    "parquet_postgres": """\
name: v_parquet
source: {type: file, format: parquet, path: data/*.parquet}
sink: {type: postgres, connection: "${PG_URL}", table: orders}
""",
    "s3_csv": "name: v_s3\nsource: {type: file, format: csv, path: 's3://bucket/in/*.csv'}\n"
    "sink: {type: duckdb, table: t}\n",
    "python": "name: v_python\nsource: {type: python, callable: 'rows:rows'}\n"
    "sink: {type: duckdb, table: t}\n",
    "duckdb": "name: v_duckdb\nsource: {type: duckdb, database: src.duckdb, table: t}\n"
    "sink: {type: duckdb, table: t}\n",
    "sqlite": "name: v_sqlite\nsource: {type: sqlite, database: s.db, query: SELECT 1}\n"
    "sink: {type: duckdb, table: t}\n",
    "rest_api": "name: v_rest\nsource: {type: rest_api, client: {base_url: 'http://h/',"
    " auth: {token: '${T}'}}, resource: {name: r, endpoint: {path: r, auth: {token: '${T}'}}}}\n"
    "sink: {type: duckdb, table: t}\n",
    "dlt": "name: v_dlt\nsource: {type: dlt, ref: 'rows:rows'}\nsink: {type: duckdb, table: t}\n",
    "postgres": "name: v_postgres\nsource: {type: postgres, connection: '${PG_URL}', table: t}\n"
    "sink: {type: filesystem, path: lake, table: t}\n",
    "merge_duckdb": "name: v_merge\nsource: {type: python, callable: 'rows:rows'}\n"
    "sink: {type: duckdb, table: t, strategy: {mode: merge, unique_key: [id]}}\n",
    "postgres_keys": "name: v_postgres_keys\nsource: {type: postgres, connection: '${PG_URL}',"
    " table: t, partition_column: id}\nsink: {type: duckdb, table: t}\n",
}


@dataclass(frozen=True)
class Compiled:
    raw: dict[str, Any]  # the document as written
    plan: Plan


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> list[Compiled]:
    base = tmp_path_factory.mktemp("defaults")
    (base / "rules.py").write_text("def ok(row):\n    return True\n")
    out = []
    for name, text in VARIANTS.items():
        loaded = parse_manifest(text, path=base / "manifest.yaml", display_path=name)
        out.append(Compiled(loaded.document, compile_loaded(loaded)))
    return out


def _concrete(doc: Any, pointer: str) -> Iterator[str]:
    """Every pointer of ``doc`` that ``pointer`` (with ``*``/``-``) names."""

    def walk(node: Any, parts: list[str], at: str) -> Iterator[str]:
        if not parts:
            yield at
            return
        head, rest = parts[0], parts[1:]
        if head == "*" and isinstance(node, dict):
            for key in node:
                yield from walk(node[key], rest, f"{at}/{key}")
        elif head == "-" and isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, rest, f"{at}/{i}")
        elif isinstance(node, dict) and head in node:
            yield from walk(node[head], rest, f"{at}/{head}")

    yield from walk(doc, pointer.split("/")[1:], "")


def _at(doc: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _present(doc: Any, pointer: str) -> bool:
    try:
        _at(doc, pointer)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def _holds(default: Default, doc: dict[str, Any], concrete: str) -> bool:
    """Whether every if/then/else branch on the way to ``concrete`` is the one taken."""
    parts = concrete.split("/")
    for where, condition, taken in default.conditions:
        target = _at(doc, "/".join(parts[: len(where.split("/"))]))
        if Draft202012Validator(condition).is_valid(target) is not taken:
            return False
    return True


def _expected_document_value(default: Default, doc: dict[str, Any]) -> Any:
    if default.template is not None:
        work_dir = doc["runtime"]["work_dir"]
        return default.template.replace("{runtime.work_dir}", work_dir).replace(
            "{name}", doc["name"]
        )
    if default.pointer.endswith("/evolution"):  # one word stands for all three settings
        return dict.fromkeys(EVOLUTION_KEYS, default.value)
    return default.value


def _path(p: Plan, text: str) -> Path:
    return (p.manifest_dir / text).resolve()


def _column(p: Plan, pointer: str) -> Any:
    column = p.sink.contract.column(pointer.split("/")[-2])
    assert column is not None
    return column


def _custom(p: Plan, pointer: str) -> Any:
    customs = [a for a in p.quality.assertions if a.type == "custom"]
    return customs[int(pointer.split("/")[-2])]


# An accessor reads the spec its own manifest compiles to (a file source's csv, a REST
# source's max_pages): the plan is Any to it, not the union of every source and sink spec.
Accessor = Callable[[Any, str], Any]
Typed = Callable[[Any, Plan], Any]
_same: Typed = lambda value, p: value  # noqa: E731
_as_path: Typed = lambda value, p: _path(p, value)  # noqa: E731
_as_tuple: Typed = lambda value, p: tuple(value)  # noqa: E731

#: Where the typed plan holds each non-structural default, and the default as that type.
TYPED: dict[str, tuple[Accessor, Typed]] = {
    "/kind": (lambda p, _: p.document["kind"], _same),  # a document marker, not in the plan
    "/environment": (lambda p, _: p.environment, _same),
    "/runtime/work_dir": (lambda p, _: p.runtime.work_dir, _as_path),
    "/runtime/chunk_size": (lambda p, _: p.runtime.chunk_size, _same),
    "/runtime/max_columns": (lambda p, _: p.runtime.max_columns, _same),
    "/runtime/engine": (lambda p, _: p.runtime.engine, _same),
    "/source/partitions": (lambda p, _: p.source.spec.partitions, _same),
    "/source/allowed_origins": (lambda p, _: p.source.spec.allowed_origins, _as_tuple),
    "/source/max_pages": (lambda p, _: p.source.spec.max_pages, _same),
    "/source/max_response_bytes": (lambda p, _: p.source.spec.max_response_bytes, _same),
    "/source/incremental/initial_value": (lambda p, _: p.source.incremental.initial_value, _same),
    "/source/incremental/lag": (lambda p, _: p.source.incremental.lag, _same),
    "/source/incremental/end_value": (lambda p, _: p.source.incremental.end_value, _same),
    **{
        f"/source/options/csv/{key}": (
            lambda p, ptr: getattr(p.source.spec.csv, ptr.rsplit("/", 1)[1]),
            _as_tuple if key == "null_values" else _same,
        )
        for key in (
            "delimiter",
            "header",
            "encoding",
            "quote_char",
            "null_values",
            "newlines_in_values",
            "max_row_bytes",
        )
    },
    "/source/options/jsonl/encoding": (lambda p, _: p.source.spec.jsonl.encoding, _same),
    "/source/options/storage/anonymous": (lambda p, _: p.source.spec.storage.anonymous, _same),
    "/source/args": (
        lambda p, _: (
            p.source.spec.args if hasattr(p.source.spec, "args") else p.source.spec.config["args"]
        ),
        _same,
    ),
    "/source/client/auth/type": (
        lambda p, _: p.source.spec.config["client"]["auth"]["type"],
        _same,
    ),
    "/source/resource/endpoint/auth/type": (
        lambda p, _: p.source.spec.config["resource"]["endpoint"]["auth"]["type"],
        _same,
    ),
    "/source/prevalidated": (lambda p, _: p.source.spec.prevalidated, _same),
    "/sink/dataset": (lambda p, _: p.sink.dataset, _same),
    "/sink/database": (lambda p, _: p.sink.spec.database, _as_path),
    "/sink/strategy/mode": (lambda p, _: p.sink.strategy.mode, _same),
    "/sink/strategy/merge_strategy": (lambda p, _: p.sink.strategy.merge_strategy, _same),
    "/sink/options/schema_contract/enforcement": (lambda p, _: p.sink.contract.enforcement, _same),
    "/sink/options/schema_contract/coercion": (lambda p, _: p.sink.contract.coercion, _same),
    "/sink/options/schema_contract/columns": (lambda p, _: p.sink.contract.columns, _as_tuple),
    **{
        f"/sink/options/schema_contract/columns/*/{key}": (
            lambda p, ptr: getattr(_column(p, ptr), ptr.rsplit("/", 1)[1]),
            _same,
        )
        for key in ("nullable", "scale", "timezone")
    },
    "/sink/options/schema_contract/evolution": (
        lambda p, _: dataclasses.astuple(p.sink.contract.evolution),
        lambda value, p: (value,) * 3,
    ),
    **{
        f"/sink/options/schema_contract/evolution/{key}": (
            lambda p, ptr: getattr(p.sink.contract.evolution, ptr.rsplit("/", 1)[1]),
            _same,
        )
        for key in EVOLUTION_KEYS
    },
    **{
        f"/sink/options/type_inference/{key}": (
            lambda p, ptr: getattr(p.sink.contract.type_inference, ptr.rsplit("/", 1)[1]),
            _same,
        )
        for key in ("enabled", "sample_rows", "empty_string_is_null", "conflict_policy")
    },
    **{
        f"/sink/options/dlq/{key}": (
            lambda p, ptr: getattr(p.sink.dlq, ptr.rsplit("/", 1)[1]),
            (lambda value, p: str(_path(p, value))) if key == "directory" else _same,
        )
        for key in (
            "enabled",
            "directory",
            "retention_days",
            "pii_policy",
            "max_record_bytes",
            "max_diagnostic_bytes",
            "max_records_per_run",
            "max_index_bytes",
            "max_segment_bytes",
        )
    },
    "/sink/options/runtime_evidence/output_dir": (lambda p, _: p.sink.evidence_dir, _as_path),
    "/sink/options/system_tables": (lambda p, _: p.sink.system_tables, _same),
    "/quality/assertions/on_failure": (lambda p, _: p.quality.on_failure, _same),
    "/quality/assertions/custom": (
        lambda p, _: tuple(a for a in p.quality.assertions if a.type == "custom"),
        _as_tuple,
    ),
    "/quality/assertions/custom/-/vectorized": (
        lambda p, ptr: _custom(p, ptr).params["vectorized"],
        _same,
    ),
    "/state/type": (lambda p, _: p.state_type, _same),
    "/observability/openlineage/namespace": (
        lambda p, _: p.observability["openlineage"]["namespace"],
        _same,
    ),
}


def test_every_schema_default_has_a_typed_home() -> None:
    assert len(DEFAULTS) > 50
    assert {d.pointer for d in DEFAULTS if not d.structural} == set(TYPED)


@pytest.mark.parametrize(
    "default", DEFAULTS, ids=lambda d: f"{d.pointer}={d.template or d.value!r}"
)
def test_the_compiler_fills_the_schema_default(default: Default, compiled: list[Compiled]) -> None:
    filled = 0
    for case in compiled:
        doc = case.plan.document
        for pointer in _concrete(doc, default.pointer):
            if _present(case.raw, pointer) or not _holds(default, doc, pointer):
                continue
            filled += 1
            if default.structural:  # filled, then its members' defaults went into it
                assert isinstance(_at(doc, pointer), dict), (case.plan.name, pointer)
                continue
            expected = _expected_document_value(default, doc)
            assert _at(doc, pointer) == expected, (case.plan.name, pointer)
            accessor, typed = TYPED[default.pointer]
            value = default.value if default.template is None else expected
            assert accessor(case.plan, pointer) == typed(value, case.plan), pointer
    assert filled, f"no test manifest leaves {default.pointer} to the compiler"


def test_templates_collapse_slashes(tmp_path: Path) -> None:
    text = "runtime: {work_dir: out/}\n" + VARIANTS["python"]
    loaded = parse_manifest(text, path=tmp_path / "manifest.yaml", display_path="m")
    doc = compile_loaded(loaded).document
    assert doc["sink"]["database"] == "out/v_python.duckdb"
    assert doc["sink"]["options"]["dlq"]["directory"] == "out/dlq"


# --- nothing downstream defaults a manifest value ---------------------------------------------


def _dataclasses(module: Any) -> list[type[Any]]:
    return [
        obj
        for obj in vars(module).values()
        if dataclasses.is_dataclass(obj)
        and isinstance(obj, type)
        and obj.__module__ == module.__name__
    ]


def test_specs_and_plan_sections_have_no_field_defaults() -> None:
    classes = [c for part in (spec_common, spec_sources, spec_sinks) for c in _dataclasses(part)]
    classes += [
        c for c in _dataclasses(plan_module) if c.__name__.endswith("Plan") and c is not Plan
    ]
    assert len(classes) >= 15
    for cls in classes:
        defaulted = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ]
        assert defaulted == [], cls.__name__


def _manifest_keys(node: Any) -> set[str]:
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                keys.update(value)
            keys |= _manifest_keys(value)
    elif isinstance(node, list):
        for item in node:
            keys |= _manifest_keys(item)
    return keys


def test_no_connector_signature_defaults_a_manifest_key() -> None:
    keys = _manifest_keys(SCHEMA)
    assert {"delimiter", "dataset", "table", "database", "connection", "path"} <= keys
    callables: list[Callable[..., Any]] = [
        make_source,
        make_sink,
        *SOURCES.values(),
        *SINKS.values(),
        FileSource.__init__,
        PythonSource.__init__,
        DuckDbSource.__init__,
        SqliteSource.__init__,
        PostgresSource.__init__,
        DuckDbSink.__init__,
        PostgresSink.__init__,
        FilesystemSink.__init__,
    ]
    for func in callables:
        defaulted = {
            name
            for name, param in inspect.signature(func).parameters.items()
            if param.default is not inspect.Parameter.empty
        }
        assert not defaulted & keys, (func.__qualname__, defaulted & keys)


def test_every_spec_type_has_a_connector() -> None:
    source_types = set(specs.SourceSpec.__args__)
    sink_types = set(specs.SinkSpec.__args__)
    assert source_types == set(SOURCES)
    assert sink_types == set(SINKS)
    assert {t.type for t in source_types} == set(specs.SOURCE_SPECS)
    assert {t.type for t in sink_types} == set(specs.SINK_SPECS)


# --- the library's dataclasses keep the schema's defaults -----------------------------------

#: Defaults kept for callers outside the compiler (``DlqStore(root)`` without a policy,
#: ``dpone.testing``, a connector's own tests), each with the schema default it must equal.
LIBRARY_DEFAULTS: dict[tuple[type[Any], str], str] = {
    **{
        (DlqPolicy, f.name): f"/sink/options/dlq/{f.name}"
        for f in dataclasses.fields(DlqPolicy)
        if f.name != "directory"
    },
    (ContractSpec, "enforcement"): "/sink/options/schema_contract/enforcement",
    (ContractSpec, "columns"): "/sink/options/schema_contract/columns",
    (ContractSpec, "coercion"): "/sink/options/schema_contract/coercion",
    **{
        (EvolutionSpec, key): f"/sink/options/schema_contract/evolution/{key}"
        for key in EVOLUTION_KEYS
    },
    **{
        (TypeInferenceSpec, f.name): f"/sink/options/type_inference/{f.name}"
        for f in dataclasses.fields(TypeInferenceSpec)
    },
    (ColumnSpec, "nullable"): "/sink/options/schema_contract/columns/*/nullable",
    (LoadSpec, "mode"): "/sink/strategy/mode",
}
#: Defaulted fields that stand for "not given", where the schema has no default (or one that
#: depends on another value the dataclass does not default: a column's type), or that are
#: objects whose own fields are checked above, or no manifest value at all.
NOT_SCHEMA_DEFAULTS = {
    (ColumnSpec, "precision"),
    (ColumnSpec, "scale"),
    (ColumnSpec, "timezone"),
    (ColumnSpec, "source"),
    (ContractSpec, "evolution"),
    (ContractSpec, "type_inference"),
    (LoadSpec, "unique_key"),
    (LoadSpec, "cursor_to"),
    (LoadSpec, "keys"),
    # upsert, as the schema's default under mode merge (a conditional default of an object
    # LoadSpec is not: test_merge_strategy_default_is_the_schema_default checks it)
    (LoadSpec, "merge_strategy"),
    (LoadSpec, "merge_key"),
    (LoadSpec, "deleted_column"),
    (LoadSpec, "valid_at"),
    (LoadSpec, "load_columns"),
    # whether source.normalize asks for child tables (no normalize: none)
    (LoadSpec, "child_tables"),
    # the child tables a sink describes with its target (none without child tables)
    (TableDefinition, "child_tables"),
    (SourceChunk, "failures"),
    (SourceChunk, "present"),
    # A scale-out partition is the source's own split, never a manifest value.
    (Partition, "file"),
    (Partition, "row_groups"),
    (Partition, "first_row"),
    (Partition, "where"),
    (Partition, "order_by"),
    (Partition, "row_offset"),
    (Partitioning, "single_reason"),
}


def _field_defaults(cls: type[Any]) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def _by_name(key: tuple[type[Any], str]) -> tuple[str, str]:
    return key[0].__name__, key[1]


def test_every_library_dataclass_default_is_classified() -> None:
    defaulted = {
        (cls, name)
        for module in (dlq_policy, contract_spec, connector_base)
        for cls in _dataclasses(module)
        for name in _field_defaults(cls)
    }
    assert defaulted == set(LIBRARY_DEFAULTS) | NOT_SCHEMA_DEFAULTS


LIBRARY_DEFAULTED = sorted(LIBRARY_DEFAULTS, key=_by_name)


@pytest.mark.parametrize(("cls", "name"), LIBRARY_DEFAULTED)
def test_a_library_dataclass_default_is_the_schema_default(cls: type[Any], name: str) -> None:
    pointer = LIBRARY_DEFAULTS[(cls, name)]
    # A conditional default applies when its object, as the dataclass's defaults make it
    # (``cls().to_json()``), takes the branch it is under.
    found = [
        d.value
        for d in DEFAULTS
        if d.pointer == pointer
        and all(
            Draft202012Validator(condition).is_valid(cls().to_json()) == taken
            for _, condition, taken in d.conditions
        )
    ]
    assert len(found) == 1, pointer
    expected = tuple(found[0]) if isinstance(found[0], dict) else found[0]
    assert _field_defaults(cls)[name] == expected, pointer


def test_merge_strategy_default_is_the_schema_default() -> None:
    found = [d for d in DEFAULTS if d.pointer == "/sink/strategy/merge_strategy"]
    assert [d.value for d in found] == ["upsert"]
    assert _field_defaults(LoadSpec)["merge_strategy"] == "upsert"
