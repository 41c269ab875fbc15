"""``dpone validate`` and ``dpone plan``: compile manifests, render the outcome."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dpone.cli.output import (
    ALLOW_ANY_IMPORT_OPTION,
    FORMAT_OPTION,
    print_json,
    render_detail,
    run_command,
)
from dpone.errors import EXIT_CONFIG, DponeError

if TYPE_CHECKING:
    from dpone.manifest.plan import Plan


@click.command("validate")
@click.argument("manifests", nargs=-1, required=True, type=click.Path(dir_okay=False))
@ALLOW_ANY_IMPORT_OPTION
@FORMAT_OPTION
def validate_cmd(manifests: tuple[str, ...], allow_any_import: bool, fmt: str) -> None:
    """Check manifests without reading any data; exit 2 if any has an error."""

    def body() -> int:
        from dpone.api import validate, validation_document

        results = []
        for path in manifests:
            result = validate(path, allow_any_import=allow_any_import)
            results.append(result)
            if fmt != "text":
                continue
            if not result.ok:
                click.echo(f"invalid  {path}: {len(result.errors)} error(s)", err=True)
                for detail in result.errors:
                    click.echo(render_detail(detail), err=True)
            else:
                assert result.fingerprint is not None
                click.echo(f"ok       {path}  ({result.name}, {result.fingerprint[:19]}…)")
            for warning in result.warnings:
                click.echo(render_detail(warning), err=True)
        doc = validation_document(results)
        valid: bool = doc["valid"]
        if fmt == "json":
            print_json(doc)
        return 0 if valid else EXIT_CONFIG

    run_command(fmt, body)


@click.command("plan")
@click.argument("manifest", type=click.Path(dir_okay=False))
@ALLOW_ANY_IMPORT_OPTION
@FORMAT_OPTION
def plan_cmd(manifest: str, allow_any_import: bool, fmt: str) -> None:
    """Show what a run of MANIFEST would do (secrets shown as their ${VAR} references)."""

    def body() -> int:
        from dpone.api import compile

        plan = compile(manifest, allow_any_import=allow_any_import)
        if fmt == "json":
            print_json(plan.to_json())
        else:
            click.echo(render_plan(plan.to_json()))
            for warning in plan.warnings:
                click.echo(render_detail(warning), err=True)
            stored = _stored_cursor(plan)
            if stored is not None:
                click.echo(stored)
        return 0

    run_command(fmt, body)


def _stored_cursor(plan: Plan) -> str | None:
    """The cursor the pipeline's state holds now (read only), when it has a state file."""
    from dpone.ops.pipeline_files import PipelineDirs
    from dpone.ops.pipelines import read_state

    if plan.state_type != "file":
        return None
    state = read_state(PipelineDirs.of(manifest=plan), plan.name)
    if state.status == "none":
        return None
    revision = f" (state revision {state.revision})" if state.status == "ok" else ""
    return f"stored       cursor {state.cursor_text}{revision}"


def _engine(runtime: dict[str, Any]) -> str:
    if runtime.get("engine", "local") != "dask":
        return "local"
    dask = runtime.get("dask") or {}
    if dask.get("address"):
        return f"dask  scheduler {dask['address']}"
    workers = dask.get("n_workers", "one per core")
    return f"dask  local cluster, workers {workers}"


def _window(inc: dict[str, Any]) -> str:
    """The incremental window in words: where the first run starts, the lag, the end."""
    initial = inc["initial_value"]
    window = "initial " + ("none: reads everything" if initial is None else str(initial))
    if inc.get("lag"):
        window += f"; reads >= cursor - lag {inc['lag']}"
    if inc.get("end_value") is not None:
        window += f"; end {inc['end_value']} (exclusive)"
    return window


def _legacy(manifest: dict[str, Any]) -> list[str]:
    """The deprecated ``quarantine.dir``'s line, when the manifest has one."""
    if "quarantine" not in manifest:
        return []
    return [
        f"legacy       quarantine.dir {manifest['quarantine']['dir']}  (deprecated: a raw "
        "export of rejected row values, sensitive)"
    ]


def render_plan(doc: dict[str, Any]) -> str:
    m = doc["manifest"]
    source, sink = m["source"], m["sink"]
    contract = sink["options"]["schema_contract"]
    dlq = sink["options"]["dlq"]
    where = (
        source.get("path")
        or source.get("table")
        or source.get("query")
        or source.get("callable")
        or source.get("ref")
        or ""
    )
    if source["type"] == "rest_api":
        where = f"{source['client']['base_url']} resource {source['resource']['name']}"
    target = f"{sink['dataset']}.{sink['table']}"
    if sink["type"] == "duckdb":
        target = f"{sink['database']} → {target}"
    elif sink["type"] == "filesystem":
        target = f"{sink['path']} → {target}"
    elif sink["type"] == "dlt":
        target = f"{sink['destination']} → {target}"
    lines = [
        f"pipeline     {doc['name']}  ({m['environment']})",
        f"fingerprint  {doc['fingerprint']}",
        f"source       {source['type']}"
        + (f" {source['format']}" if "format" in source else "")
        + f"  {where}",
        f"sink         {sink['type']}  {target}  ({sink['strategy']['mode']}"
        + (f" on {', '.join(keys)}" if (keys := sink["strategy"].get("unique_key")) else "")
        + ")",
        f"chunks       {m['runtime']['chunk_size']} rows; work_dir {m['runtime']['work_dir']}",
        f"engine       {_engine(m['runtime'])}",
        f"contract     {contract['enforcement']} (coercion {contract['coercion']}); "
        f"{len(contract['columns'])} declared column(s);"
        f" evolution {', '.join(f'{k}={v}' for k, v in contract['evolution'].items())}",
    ]
    for name, spec in contract["columns"].items():
        extra = ""
        if spec["type"] == "decimal":
            extra = f"({spec['precision']},{spec['scale']})"
        if spec.get("timezone"):
            extra = " with time zone"
        null = "" if spec["nullable"] else " not null"
        origin = ""
        if "source" in spec:
            origin = f"  ← source column {json.dumps(spec['source'], ensure_ascii=False)}"
        lines.append(f"  - {name}: {spec['type']}{extra}{null}{origin}")
    # The naming rule of docs/sinks.md, which the run applies to the names the source brings.
    lines.append(
        'names        as the source writes them; "" → column_<position>; '
        "names equal but for the case of A-Z refused"
    )
    if "incremental" in source:
        inc = source["incremental"]
        lines.append(f"incremental  {inc['cursor_column']} ({_window(inc)})")
    lines.append(
        f"dlq          {dlq['directory']}  (pii {dlq['pii_policy']}, "
        f"retention {dlq['retention_days']} days, enabled {str(dlq['enabled']).lower()})"
    )
    lines.extend(_legacy(m))
    lines.append(f"evidence     {sink['options']['runtime_evidence']['output_dir']}")
    lines.append(f"state        {m['state']['type']}")
    for assertion in doc["assertions"]:
        lines.append(f"assertion    {assertion['name']}  on_failure {assertion['on_failure']}")
    if doc["secrets"]:
        lines.append(f"secrets      from the environment: {', '.join(doc['secrets'])}")
    return "\n".join(lines)


__all__ = ["DponeError", "plan_cmd", "validate_cmd"]
