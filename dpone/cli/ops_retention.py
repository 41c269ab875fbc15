"""``dpone ops retention plan|apply``: mark-and-sweep retention of the DLQ (SPEC §8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dpone import logs
from dpone.cli.output import (
    ALLOW_UNSIGNED_OPTION,
    markdown_format_option,
    print_document,
    run_command,
    signature_options,
)

FORMAT = markdown_format_option("the plan or result document")


@click.group("retention")
def retention_group() -> None:
    """Delete expired DLQ records: plan first, then apply the plan."""


@retention_group.command("plan")
@click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(path_type=Path),
    help="The DLQ root (dlq.directory, by default <work_dir>/dlq).",
)
@click.option("--now", "now", default=None, help="Judge expiry at this time (default: now).")
@click.option(
    "--include-unacknowledged",
    is_flag=True,
    help="Also delete expired records that were never acknowledged (never replayed).",
)
@click.option(
    "--pin-evidence",
    "evidence_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A folder of evidence bundles to keep (repeatable): the DLQ runs they point at "
    "(dlq.index_ref) are protected whole.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the plan here (what `dpone ops retention apply` takes).",
)
@ALLOW_UNSIGNED_OPTION
@FORMAT
def plan_cmd(
    directory: Path,
    now: str | None,
    include_unacknowledged: bool,
    evidence_dirs: tuple[Path, ...],
    output: Path | None,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Mark: decide which records may be deleted; deletes nothing."""

    def body() -> int:
        from dpone import ops

        logs.to_stderr()
        doc = ops.retention_plan(
            directory,
            now=now,
            include_unacknowledged=include_unacknowledged,
            evidence_dirs=evidence_dirs,
            output=output,
            allow_unsigned=allow_unsigned,
        ).to_json()
        print_document(fmt, doc, lambda: render_plan(doc, output))
        return 0

    run_command(fmt, body)


@retention_group.command("apply")
@click.argument("plan_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    help="The DLQ root, when it moved since the plan was made (default: the plan's dir).",
)
@click.option(
    "--include-unacknowledged",
    is_flag=True,
    help="Confirm a plan made with --include-unacknowledged (apply refuses it otherwise).",
)
@click.option(
    "--pin-evidence",
    "evidence_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A folder of evidence bundles to keep (repeatable), on top of the plan's: the DLQ "
    "runs they point at must not be touched.",
)
@signature_options
@FORMAT
def apply_cmd(
    plan_file: Path,
    directory: Path | None,
    include_unacknowledged: bool,
    evidence_dirs: tuple[Path, ...],
    require_signature: bool,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Sweep: refuse if the store drifted from the plan, else delete what it planned.

    Exit 0 when every touched run verifies afterwards, 1 on drift or findings."""

    def body() -> int:
        from dpone import ops

        logs.to_stderr()
        result = ops.retention_apply(
            plan_file,
            dlq_dir=directory,
            evidence_dirs=evidence_dirs,
            include_unacknowledged=include_unacknowledged,
            require_signature=require_signature,
            allow_unsigned=allow_unsigned,
        )
        doc = result.to_json()
        print_document(fmt, doc, lambda: render_result(doc))
        return 0 if result.clean else 1

    run_command(fmt, body)


def _looks_ahead(now: str) -> bool:
    """Whether a plan's ``now`` (--now) is later than this moment."""
    from dpone.clock import utc_now
    from dpone.dlq.model import parse_timestamp

    return parse_timestamp(now) > utc_now()


def render_plan(doc: dict[str, Any], output: Path | None) -> str:
    totals = doc["totals"]
    protected = totals["protected"]
    unacked = (
        "**deleted when expired** (--include-unacknowledged)"
        if doc["include_unacknowledged"]
        else "protected as pending_replay"
    )
    lines = [
        "# DLQ retention plan",
        "",
        f"- dir: `{doc['dir']}`",
        f"- now: {doc['now']}",
        f"- unacknowledged records: {unacked}",
        f"- evidence pins: {len(doc['pinned_runs'])} run(s) from "
        f"{len(doc['evidence_dirs'])} folder(s)",
        f"- snapshot: `{doc['snapshot']['fingerprint']}`",
        "",
        f"{totals['records']} record(s): {totals['delete']} to delete, "
        + ", ".join(f"{n} {name}" for name, n in protected.items())
        + " protected.",
        "",
    ]
    if doc["runs"]:
        lines += [
            "| run | status | records | delete | active | evidence_pinned | unexpired "
            "| pending_replay |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for run in doc["runs"]:
            p = run["protected"]
            lines.append(
                f"| {run['run_id']} | {run['status']} | {run['record_count']} | "
                f"{sum(cut['delete_count'] for cut in run['delete'])} | {p['active']} | "
                f"{p['evidence_pinned']} | "
                f"{p['unexpired']} | {p['pending_replay']} |"
            )
        lines.append("")
    if _looks_ahead(doc["now"]):
        lines += [
            "This plan looks ahead: its `now` has not come yet, and `apply` refuses such a plan "
            "(it would expire records early) until that time has passed.",
            "",
        ]
    if output is not None:
        lines += [f"Written to {output}; apply it with `dpone ops retention apply {output}`.", ""]
    else:
        lines += ["Nothing was written: pass --output F to apply this plan later.", ""]
    return "\n".join(lines)


def render_result(doc: dict[str, Any]) -> str:
    lines = [
        "# DLQ retention applied",
        "",
        f"Deleted {doc['deleted_records']} record(s) and {doc['deleted_acks']} "
        f"acknowledgement(s) from {len(doc['runs'])} run(s); plan `{doc['plan_id']}`.",
        "",
    ]
    if doc["runs"]:
        lines += ["| run | deleted | left | resumed |", "| --- | ---: | ---: | --- |"]
        lines += [
            f"| {r['run_id']} | {r['deleted']} | {r['record_count']} | "
            f"{'yes' if r['resumed'] else 'no'} |"
            for r in doc["runs"]
        ]
        lines.append("")
    findings = doc["verify"]["findings"]
    if findings:
        lines.append(f"verify: {len(findings)} finding(s)")
        lines += [f"- {f['code']}: {f['message']}" for f in findings]
    else:
        lines.append("verify: every touched run verifies")
    lines.append("")
    return "\n".join(lines)


__all__ = ["retention_group"]
