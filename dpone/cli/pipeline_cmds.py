"""``dpone pipeline list|info|runs|reset|drop``: look at a pipeline, and reset or remove it
(SPEC §14). Reading is free; every change says what it will do and asks first (``--yes`` is
required when stdin is not a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dpone.cli.output import FORMAT_OPTION, print_document, print_json, run_command
from dpone.errors import UsageError

if TYPE_CHECKING:
    from dpone.ops.pipelines import PipelineInfo, RunView


def _where(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option(
        "--manifest",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Take the folders (work dir, evidence, DLQ) and the sink from this manifest.",
    )(func)
    return click.option(
        "--work-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="The pipeline's runtime.work_dir (the default layout under it).",
    )(func)


def _places(work_dir: Path | None, manifest: Path | None) -> dict[str, Any]:
    if work_dir is not None and manifest is not None:
        raise UsageError(
            "pass --work-dir or --manifest, not both",
            fixes=("--manifest takes the work dir from the manifest",),
        )
    if work_dir is None and manifest is None:
        raise UsageError(
            "name the pipeline's work dir", fixes=("pass --work-dir DIR or --manifest M",)
        )
    return {"work_dir": work_dir, "manifest": manifest}


def confirm(what: str, yes: bool) -> None:
    """Go on only once the operator said so: ``--yes``, or an answer on a terminal."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"{what}: this changes files, and stdin is not a terminal to ask on",
            code="DPONE_CONFIRMATION_REQUIRED",
            fixes=("add --yes once you are sure",),
        )
    if not click.confirm(f"{what}. Go on?", default=False, err=True):
        raise UsageError("nothing was changed", code="DPONE_CANCELLED")


@click.group("pipeline")
def pipeline_group() -> None:
    """Look at a pipeline's state, runs, DLQ and sink table; reset or drop it."""


@pipeline_group.command("list")
@_where
@FORMAT_OPTION
def list_cmd(work_dir: Path | None, manifest: Path | None, fmt: str) -> None:
    """Every pipeline of a work dir: its state, cursor and last run."""

    def body() -> int:
        from dpone import ops

        listed = ops.pipeline_list(**_places(work_dir, manifest))
        if fmt == "json":
            print_json(listed.to_json())
            return 0
        if not listed.pipelines:
            click.echo(f"no pipeline in {listed.work_dir}")
        for info in listed.pipelines:
            last = info.runs[0] if info.runs else None
            click.echo(
                f"{info.name:<24} {info.run_count:>4} run(s)  cursor {info.state.cursor_text}"
                + (f"  last {last.run_id} {_outcome(last)}" if last else "")
            )
        return 0

    run_command(fmt, body)


@pipeline_group.command("info")
@click.argument("name")
@_where
@FORMAT_OPTION
def info_cmd(name: str, work_dir: Path | None, manifest: Path | None, fmt: str) -> None:
    """What NAME holds: state and cursor, the last runs, its DLQ runs and the sink table."""

    def body() -> int:
        from dpone import ops

        info = ops.pipeline_info(name, **_places(work_dir, manifest))
        print_document(fmt, info.to_json(), lambda: render_info(info), newline=True)
        return 0

    run_command(fmt, body)


@pipeline_group.command("runs")
@click.argument("name")
@_where
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@FORMAT_OPTION
def runs_cmd(name: str, work_dir: Path | None, manifest: Path | None, limit: int, fmt: str) -> None:
    """The last runs of NAME, newest first, with outcomes and counts."""

    def body() -> int:
        from dpone import ops

        info = ops.pipeline_info(name, **_places(work_dir, manifest), limit=limit)
        if fmt == "json":  # the info document, with the last ``limit`` runs
            print_json(info.to_json())
            return 0
        click.echo(f"{info.name}: {info.run_count} run(s), newest first")
        click.echo(_runs_table(info.runs))
        return 0

    run_command(fmt, body)


@pipeline_group.command("reset")
@click.argument("name")
@_where
@click.option(
    "--drop-table",
    is_flag=True,
    help="Empty the sink table first (duckdb, postgres, filesystem; needs --manifest), so an "
    "append table is reloaded once, not twice.",
)
@click.option("--yes", is_flag=True, help="Do it without asking (required when not on a TTY).")
@FORMAT_OPTION
def reset_cmd(
    name: str,
    work_dir: Path | None,
    manifest: Path | None,
    drop_table: bool,
    yes: bool,
    fmt: str,
) -> None:
    """Forget NAME's state, so the next run reads its source from the start. Refused for an
    append table (it would load every row twice) unless --drop-table empties it first."""

    def body() -> int:
        from dpone import ops

        places = _places(work_dir, manifest)
        decision = ops.pipeline_reset_check(name, **places, drop_table=drop_table)
        warning = decision.warning()
        if warning is not None:
            click.echo(f"note: {warning}", err=True)
        confirm(decision.describe(), yes)
        result = ops.pipeline_reset(name, **places, drop_table=drop_table)
        if fmt == "json":
            print_json(result.to_json())
            return 0
        if result.table_emptied:
            click.echo(f"emptied {decision.table} (load {result.reset_load_id})")
        click.echo(
            f"forgot the state of {name}; the next run reads the source from the start"
            if result.state_removed
            else f"{name} had no state to forget"
        )
        return 0

    run_command(fmt, body)


@pipeline_group.command("drop")
@click.argument("name")
@_where
@click.option(
    "--with-evidence",
    is_flag=True,
    help="Also remove its evidence bundles and DLQ runs (records pending replay included).",
)
@click.option("--yes", is_flag=True, help="Do it without asking (required when not on a TTY).")
@FORMAT_OPTION
def drop_cmd(
    name: str,
    work_dir: Path | None,
    manifest: Path | None,
    with_evidence: bool,
    yes: bool,
    fmt: str,
) -> None:
    """Remove NAME's state and journal (the sink table stays)."""

    def body() -> int:
        from dpone import ops

        places = _places(work_dir, manifest)
        info = ops.pipeline_info(name, **places, limit=0)  # refuses an unknown pipeline
        extra = " and its evidence and DLQ runs" if with_evidence else ""
        confirm(f"drop pipeline {info.name}: remove its state and journal{extra}", yes)
        result = ops.pipeline_drop(name, **places, with_evidence=with_evidence)
        if fmt == "json":
            print_json(result.to_json())
            return 0
        for path in result.removed:
            click.echo(f"removed {path}")
        return 0

    run_command(fmt, body)


def _outcome(run: RunView) -> str:
    return run.data_outcome if run.execution_status == "succeeded" else "FAILED"


def _value(cursor: str | int | None) -> str:
    return "none" if cursor is None else str(cursor)


def _runs_table(runs: tuple[RunView, ...]) -> str:
    lines = [
        f"  {'run':<28} {'started':<27} {'outcome':<23} {'read':>8} {'loaded':>8} "
        f"{'quarant.':>8}  cursor"
    ]
    for run in runs:
        move = (
            f"{_value(run.cursor_from)} → {_value(run.cursor_to)}"
            if run.state_advanced
            else "unchanged"
        )
        lines.append(
            f"  {run.run_id:<28} {run.started_at:<27} {_outcome(run):<23} "
            f"{run.rows['read']:>8,} {run.rows['loaded']:>8,} {run.rows['quarantined']:>8,}  "
            f"{move}" + (f"  ({run.failure_code})" if run.failure_code else "")
        )
    return "\n".join(lines)


def render_info(info: PipelineInfo) -> str:
    state = info.state
    lines = [f"pipeline   {info.name}  (work dir {info.work_dir})"]
    if state.status == "ok":
        lines.append(
            f"state      revision {state.revision}, last run {state.last_run_id}, "
            f"updated {state.updated_at}"
        )
    elif state.status == "invalid":
        lines.append(
            f"state      does not verify ({state.code}); "
            f"`dpone pipeline reset {info.name}` forgets it"
        )
    else:
        lines.append("state      none")
    lines.append(f"cursor     {state.cursor_text}")
    journal = info.journal
    if journal.unfinished:
        lines.append(f"journal    run {journal.run_id} died midway: the next run recovers it")
    elif journal.status == "invalid":
        lines.append(f"journal    does not verify ({journal.code})")
    if info.sink is not None:
        mode = info.sink["mode"] or "strategy not recorded"
        lines.append(f"sink       {info.sink['type']} {info.sink['table']}  ({mode})")
    lines.append(f"runs       {info.run_count} (the last {len(info.runs)} below)")
    if info.runs:
        lines.append(_runs_table(info.runs))
    if info.dlq_runs:
        lines.append(f"dlq runs   {len(info.dlq_runs)}")
        for dlq in info.dlq_runs:
            reasons = ", ".join(f"{code} {n}" for code, n in sorted(dlq.by_reason.items()))
            lines.append(
                f"  {dlq.run_id:<28} {dlq.status:<11} {dlq.records:>6} record(s) "
                f"{dlq.bytes:>9,} bytes"
                + (f"  {reasons}" if reasons else "")
                + (f"  ({dlq.code})" if dlq.code else "")
            )
    for run, why in info.unreadable:
        lines.append(f"unreadable {run}: {why}")
    return "\n".join(lines)


__all__ = ["confirm", "pipeline_group", "render_info"]
