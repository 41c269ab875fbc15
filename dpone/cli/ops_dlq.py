"""``dpone ops dlq verify|summary``: check and count a dead-letter store (SPEC §8)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dpone import logs
from dpone.cli.output import (
    ALLOW_UNSIGNED_OPTION,
    FORMAT_OPTION,
    markdown_format_option,
    print_document,
    print_json,
    run_command,
    signature_options,
)

if TYPE_CHECKING:
    from dpone.ops.summary import DlqSummary

DIR_OPTION = click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(path_type=Path),
    help="The DLQ root (dlq.directory, by default <work_dir>/dlq).",
)
RUN_OPTION = click.option("--run-id", default=None, help="Only this run (default: every run).")


@click.group("dlq")
def dlq_group() -> None:
    """Verify and summarize the dead-letter store."""


@dlq_group.command("verify")
@DIR_OPTION
@RUN_OPTION
@click.option(
    "--repair",
    is_flag=True,
    help="Close abandoned runs as aborted and remove crash leftovers; never touches tampering.",
)
@signature_options
@FORMAT_OPTION
def verify_cmd(
    directory: Path,
    run_id: str | None,
    repair: bool,
    require_signature: bool,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Check every checksum, index and acknowledgement. Exit 0 clean, 1 with findings."""

    def body() -> int:
        from dpone import ops

        logs.to_stderr()
        result = ops.verify(
            directory,
            run_id=run_id,
            repair=repair,
            require_signature=require_signature,
            allow_unsigned=allow_unsigned,
        )
        findings, repaired = result.findings, result.repaired
        if fmt == "json":
            print_json(result.to_json())
        else:
            for finding in repaired:
                click.echo(f"repaired {finding.code}: {finding.message}")
            for finding in findings:
                hint = " (repairable with --repair)" if finding.repairable else ""
                click.echo(f"{finding.code}: {finding.message}{hint}")
            scope = f"run {run_id}" if run_id else str(directory)
            if findings:
                click.echo(f"{len(findings)} finding(s) in {scope}")
            else:
                click.echo(f"ok: {scope} verifies")
        return 1 if findings else 0

    run_command(fmt, body)


@dlq_group.command("summary")
@DIR_OPTION
@RUN_OPTION
@click.option(
    "--evidence-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the runs' evidence bundles are, for the hints they recorded. "
    "Default: evidence/ next to the DLQ folder.",
)
@ALLOW_UNSIGNED_OPTION
@markdown_format_option("the summary document")
def summary_cmd(
    directory: Path,
    run_id: str | None,
    evidence_dir: Path | None,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Records per reason code and column, per run (from verified indexes), with the hints
    the runs recorded in their evidence (what would fix the rejected rows)."""

    def body() -> int:
        from dpone.ops import open_store
        from dpone.ops.summary import summarize

        logs.to_stderr()
        store = open_store(directory, allow_unsigned=allow_unsigned)
        summary = summarize(store, run_id, evidence_dir=evidence_dir)
        print_document(fmt, summary.to_json(), lambda: render_summary(summary))
        return 0

    run_command(fmt, body)


def render_summary(summary: DlqSummary) -> str:
    """The summary for people (``--format md``)."""
    lines = ["# DLQ summary", ""]
    if not summary.runs:
        return "\n".join([*lines, "No runs.", ""])
    lines += [
        f"{len(summary.runs)} run(s), {summary.record_count} record(s).",
        "",
        "| run | pipeline | status | records |",
        "| --- | --- | --- | ---: |",
    ]
    for run in summary.runs:
        pipeline = _cell(run.pipeline) if run.pipeline else "-"
        lines.append(f"| {run.run_id} | {pipeline} | {run.status} | {run.record_count} |")
    for run in summary.runs:
        lines += ["", f"## Run {run.run_id} ({run.status})", ""]
        if not run.by_reason_column:
            lines.append("No records.")
            continue
        lines += ["| reason | column | records |", "| --- | --- | ---: |"]
        for item in run.by_reason_column:
            column = _cell(item.column) if item.column is not None else "-"
            lines.append(f"| {item.code} | {column} | {item.count} |")
        if not run.hints and run.record_count and not run.evidence_found:
            lines += [
                "",
                "No hints: the run's evidence bundle was not found "
                "(`--evidence-dir` names where the bundles are).",
            ]
        elif not run.hints and run.record_count:
            lines += [
                "",
                "No hints: no one setting would load these rows (no token shared by most "
                "rejects of a column, none repairable by `coercion: safe`); "
                "each record's reason and row reference are in the run's segments "
                "(docs/dlq.md, Querying the DLQ with DuckDB).",
            ]
        if run.hints:
            lines += ["", "Hints:", ""]
        for hint in run.hints:
            fix = f" Fix: `{hint['fix']}`" if hint.get("fix") else ""
            lines.append(f"- {hint['message']}.{fix}")
    lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """A column name made safe for one Markdown table cell."""
    return (
        "`"
        + text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("`", "'")
        .replace("\n", " ")
        .replace("\r", " ")
        + "`"
    )


__all__ = ["dlq_group"]
