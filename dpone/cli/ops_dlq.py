"""``dpone ops dlq verify|summary``: check and count a dead-letter store (SPEC §8)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dpone.cli.output import (
    FORMAT_OPTION,
    REQUIRE_SIGNATURE_OPTION,
    markdown_format_option,
    print_json,
    run_command,
)
from dpone.errors import UsageError

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

DIR_OPTION = click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(path_type=Path),
    help="The DLQ root (dlq.directory, by default <work_dir>/dlq).",
)
RUN_OPTION = click.option("--run-id", default=None, help="Only this run (default: every run).")


#: What a DLQ root holds at its top (SPEC §5); anything else alone is not a DLQ store.
STORE_FOLDERS = ("runs", "acks")


def _store_at(directory: Path) -> DlqStore:
    """The store at ``directory``. A missing folder, or a folder with other things in it but
    neither ``runs/`` nor ``acks/`` (a work dir, the manifest's folder), is a usage error
    (exit 2): verifying it would say "ok" about a store that is not there. An empty folder is
    an empty store (a DLQ root before its first rejected row) and verifies."""
    from dpone.dlq.store import DlqStore

    fix = "pass the DLQ root with --dir (dlq.directory, by default <work_dir>/dlq)"
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is not a folder", code="DPONE_DLQ_DIR_NOT_FOUND", fixes=(fix,)
        )
    is_store = any((directory / name).is_dir() for name in STORE_FOLDERS)
    if not is_store and any(directory.iterdir()):
        raise UsageError(
            f"{directory} is not a DLQ store: it has neither runs/ nor acks/",
            code="DPONE_DLQ_NOT_A_STORE",
            fixes=(fix,),
        )
    return DlqStore(directory)


def _logs_to_stderr() -> None:
    """Keep stdout for the report: unconfigured structlog would print logs there."""
    import structlog

    if not structlog.is_configured():
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))


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
@REQUIRE_SIGNATURE_OPTION
@FORMAT_OPTION
def verify_cmd(
    directory: Path, run_id: str | None, repair: bool, require_signature: bool, fmt: str
) -> None:
    """Check every checksum, index and acknowledgement. Exit 0 clean, 1 with findings."""

    def body() -> int:
        from dpone.signing import require_key

        _logs_to_stderr()
        if require_signature:
            require_key()
        store = _store_at(directory)
        repaired = store.repair(run_id) if repair else []
        findings = store.verify(run_id)
        if require_signature:
            from dpone.dlq.verify import signature_findings

            seen = {(f.code, f.run_id) for f in findings}
            findings += [
                f for f in signature_findings(store, run_id) if (f.code, f.run_id) not in seen
            ]
        if fmt == "json":
            print_json(
                {
                    "dir": str(directory),
                    "run_id": run_id,
                    "clean": not findings,
                    "findings": [f.to_json() for f in findings],
                    "repaired": [f.to_json() for f in repaired],
                }
            )
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
@markdown_format_option("the summary document")
def summary_cmd(directory: Path, run_id: str | None, fmt: str) -> None:
    """Records per reason code and column, per run (from verified indexes)."""

    def body() -> int:
        _logs_to_stderr()
        store = _store_at(directory)
        summary = store.summary(run_id)
        if fmt == "json":
            print_json(summary.to_json())
        else:
            click.echo(summary.to_markdown(), nl=False)
        return 0

    run_command("json" if fmt == "json" else "text", body)


__all__ = ["dlq_group"]
