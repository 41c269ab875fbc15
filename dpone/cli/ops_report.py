"""``dpone ops report``: the operator's HTML page of a work dir (SPEC §14)."""

from __future__ import annotations

from pathlib import Path

import click

from dpone.cli.output import FORMAT_OPTION, print_json, run_command


@click.command("report")
@click.option(
    "--work-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The pipelines' runtime.work_dir.",
)
@click.option(
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (one self-contained HTML file).",
)
@click.option("--now", default=None, help="Judge retention at this time (ISO-8601; default now).")
@FORMAT_OPTION
def report_cmd(work_dir: Path, output: Path, now: str | None, fmt: str) -> None:
    """Write one HTML page: runs over time, rejects by reason and column, schema changes,
    release gate verdicts, DLQ size and what retention would free. No row values."""

    def body() -> int:
        from dpone import ops

        report = ops.ops_report(work_dir, output=output, now=now)
        if fmt == "json":
            print_json(report.to_json())
        else:
            runs = sum(p.run_count for p in report.pipelines)
            click.echo(
                f"wrote {output}: {len(report.pipelines)} pipeline(s), {runs} run(s), "
                f"{len(report.gates)} gate report(s)"
            )
        return 0

    run_command(fmt, body)


__all__ = ["report_cmd"]
