"""Package ``__init__``s import lazily: compiling a manifest loads no Arrow, no database, no
DLQ writer and no runtime, and every re-exported name still resolves on first use."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import dpone

HEAVY = ("pyarrow", "duckdb", "dlt", "psycopg2", "adbc_driver_postgresql")


def _packages() -> list[str]:
    found = ["dpone"]
    for info in pkgutil.walk_packages(dpone.__path__, "dpone."):
        if info.ispkg:
            found.append(info.name)
    return sorted(found)


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_compiling_imports_no_io_and_no_runtime() -> None:
    loaded = _loaded_after("import dpone.manifest.compiler")
    assert "dpone.manifest.compiler" in loaded  # the probe ran
    assert [m for m in HEAVY if m in loaded] == []
    unwanted = ("dpone.dlq.writer", "dpone.dlq.store", "dpone.runtime", "dpone.connectors")
    assert sorted(m for m in loaded if m.startswith(unwanted)) == []


def test_built_in_assertions_compile_without_scanning_installed_distributions() -> None:
    # importlib.metadata (entry points, the email parser) costs about 10 ms of start-up:
    # only a manifest naming a plugin type or a custom predicate needs it.
    from tests.support.paths import EXAMPLES

    manifest = EXAMPLES / "orders_csv" / "manifest.yaml"  # built-in assertions, no custom
    loaded = _loaded_after(f"import dpone\ndpone.compile({str(manifest)!r})")
    assert "dpone.manifest.plan" in loaded  # the probe compiled
    assert "importlib.metadata" not in loaded


@pytest.mark.parametrize("package", _packages())
def test_a_package_init_imports_no_heavy_module(package: str) -> None:
    loaded = _loaded_after(f"import {package}")
    assert package in loaded
    assert [m for m in HEAVY if m in loaded] == []


def _lazy_packages() -> list[ModuleType]:
    modules = [importlib.import_module(name) for name in _packages()]
    return [m for m in modules if "__getattr__" in vars(m)]


@pytest.mark.parametrize("module", _lazy_packages(), ids=lambda m: m.__name__)
def test_every_lazy_name_resolves(module: ModuleType) -> None:
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
    # A name that is also a submodule's must mean the same whether the submodule was imported
    # first (the import binds the submodule on the package) or not: two fresh processes.
    for info in pkgutil.iter_modules(module.__path__):
        if info.name in module.__all__:
            seen = {
                _kind_of(module.__name__, info.name, submodule_first=first)
                for first in (False, True)
            }
            assert len(seen) == 1, (info.name, seen)


def _kind_of(package: str, name: str, *, submodule_first: bool) -> str:
    """The type of ``package.name`` in a fresh process that imports the submodule ``name``
    before or after reading the attribute."""
    read = f"kind = type(getattr(pkg, {name!r})).__name__"
    load = f"importlib.import_module('{package}.{name}')"
    steps = [load, read] if submodule_first else [read, load]
    code = "\n".join([f"import importlib, {package} as pkg", *steps, "print(kind)"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_an_ops_submodule_never_shadows_an_api_function() -> None:
    # Importing a submodule binds its name on the package: ops/verification.py and
    # ops/replay/ must not be called verify or replay_plan (SPEC §11's functions).
    import dpone.ops

    for info in pkgutil.iter_modules(dpone.ops.__path__, "dpone.ops."):
        importlib.import_module(info.name)
    for name in ("verify", "replay_plan", "replay_execute", "retention_plan", "release_gate"):
        assert callable(getattr(dpone.ops, name)), name
        assert not isinstance(getattr(dpone.ops, name), ModuleType), name


def test_a_csv_run_into_duckdb_loads_only_what_it_uses(tmp_path: Path) -> None:
    """``dpone run`` (JSON logs, as when scheduled) of a CSV file into DuckDB: no console
    logging (structlog pulls rich and asyncio), no other file format's reader, no DLQ
    acknowledgement or deletion code, no dlt or PostgreSQL driver, no system tables, and no
    jsonschema while the manifest, the state and the journal read back are valid
    (dpone.validity answers); each is start-up time. Two runs: the second reads the first's
    state."""
    (tmp_path / "data.csv").write_text("id,name\n1,a\n2,\n", encoding="utf-8")
    manifest = {
        "name": "lazy_run",
        "source": {"type": "file", "format": "csv", "path": "data.csv"},
        "sink": {
            "type": "duckdb",
            "database": str(tmp_path / "w.duckdb"),
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {"id": {"type": "integer"}, "name": {"type": "string"}},
                }
            },
        },
    }
    (tmp_path / "manifest.yaml").write_text(json.dumps(manifest), encoding="utf-8")
    code = (
        "import sys\n"
        "from dpone.cli.main import cli\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        cli(['run', 'manifest.yaml', '--format', 'json'], prog_name='dpone')\n"
        "    except SystemExit as done:\n"
        "        assert not done.code, done.code\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    loaded = set(out.split())
    assert "dpone.runtime.stream" in loaded  # the probe ran
    unwanted = (
        "structlog",
        "rich",
        "asyncio",
        "dlt",
        "psycopg2",
        "adbc_driver_postgresql",
        "dpone.connectors.sources.file.jsonl",
        "dpone.connectors.sources.file.parquet",
        "dpone.dlq.acks",
        "dpone.dlq.compaction",
        "dpone.connectors.systables",  # only a run with sink.options.system_tables
        "jsonschema",
        "referencing",
    )
    assert sorted(m for m in loaded if m.split(".")[0] in unwanted or m in unwanted) == []
