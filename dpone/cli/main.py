"""The ``dpone`` command line: thin click commands that parse, call one service, render."""

from __future__ import annotations

import click

from dpone._version import __version__
from dpone.cli.manifest_cmds import plan_cmd, validate_cmd
from dpone.cli.plugins_cmd import plugins_group
from dpone.cli.run_cmd import run_cmd
from dpone.cli.schemas_cmds import schemas_group


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="dpone")
def cli() -> None:
    """dpone: load data safely from a YAML manifest, with runtime data contracts."""
    from dpone.logs import configure

    # Every command logs to stderr (console on a TTY, JSON lines otherwise): stdout carries
    # only the command's own output, so `--format json` is always one parseable document.
    configure()


@cli.group("ops")
def ops() -> None:
    """Operate the dead-letter store, replay, retention, the release gate and the report."""


cli.add_command(validate_cmd)
cli.add_command(plan_cmd)
cli.add_command(run_cmd)
cli.add_command(schemas_group)
cli.add_command(plugins_group)
# ops subcommands
from dpone.cli.ops_dlq import dlq_group  # noqa: E402

ops.add_command(dlq_group)
from dpone.cli.ops_replay import quarantine_replay_cmd  # noqa: E402
from dpone.cli.ops_retention import retention_group  # noqa: E402

ops.add_command(quarantine_replay_cmd)
ops.add_command(retention_group)
from dpone.cli.ops_gate import release_gate_cmd  # noqa: E402

ops.add_command(release_gate_cmd)
from dpone.cli.ops_report import report_cmd  # noqa: E402
from dpone.cli.pipeline_cmds import pipeline_group  # noqa: E402

ops.add_command(report_cmd)
cli.add_command(pipeline_group)


def main() -> None:
    cli(prog_name="dpone")
