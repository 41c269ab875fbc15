"""``dpone ops release-gate``: pass or block a release on its evidence bundles (SPEC §7)."""

from __future__ import annotations

from pathlib import Path

import click

from dpone.cli.output import (
    markdown_format_option,
    print_document,
    run_command,
    signature_options,
)

OUTCOMES = "passed, passed_with_quarantine, passed_with_warnings, failed_quality_gate"


@click.command("release-gate")
@click.argument("evidence", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--allow-outcome",
    "allowed",
    multiple=True,
    metavar="OUTCOME",
    help=f"A data outcome to accept (repeatable; one of {OUTCOMES}). "
    "Default: passed, passed_with_quarantine, passed_with_warnings.",
)
@click.option(
    "--max-quarantine-ratio",
    "max_ratio",
    default=None,
    metavar="R",
    help="The largest accepted rows_quarantined / rows_read, 0 to 1 (1: no limit). Default: 0.01.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    default=None,
    help="Let a run that read rows but loaded none pass (by default it blocks).",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="A dpone.gate-policy.v1 file (YAML or JSON); flags given here override it.",
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A folder bundles and DLQ indexes must be inside (repeatable). "
    "Default: the current directory.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where release_gate.json and release_gate.md go. Default: the current directory.",
)
@signature_options
@markdown_format_option("the release_gate.json document")
def release_gate_cmd(
    evidence: tuple[Path, ...],
    allowed: tuple[str, ...],
    max_ratio: str | None,
    roots: tuple[Path, ...],
    output: Path | None,
    allow_empty: bool | None,
    policy_file: Path | None,
    require_signature: bool,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Verify evidence bundles and apply a release policy. Exit 0 pass, 1 blocked, 2 usage.

    Without flags a failed run, a failed quality gate, a run that loaded none of the rows it
    read and a quarantine ratio above 1% block."""

    def body() -> int:
        from dpone import ops
        from dpone.ops.gate.report import render_markdown

        doc = ops.release_gate(
            evidence,
            allowed_outcomes=allowed,
            max_quarantine_ratio=max_ratio,
            roots=roots,
            output=output if output is not None else Path.cwd(),
            require_signature=require_signature,
            allow_unsigned=allow_unsigned,
            allow_empty=allow_empty,
            policy=policy_file,
        ).to_json()
        print_document(fmt, doc, lambda: render_markdown(doc))
        return 0 if doc["decision"] == "pass" else 1

    run_command(fmt, body)


__all__ = ["release_gate_cmd"]
