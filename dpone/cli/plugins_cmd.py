"""``dpone plugins list``: the assertion registry, with where each type came from."""

from __future__ import annotations

import click

from dpone.cli.output import FORMAT_OPTION, print_json, run_command


@click.group("plugins")
def plugins_group() -> None:
    """Registered extensions (entry-point group dpone.assertion)."""


@plugins_group.command("list")
@FORMAT_OPTION
def list_cmd(fmt: str) -> None:
    """List assertion types: name, scope, value, origin and target."""

    def body() -> int:
        from dpone.assertions.catalog import CUSTOM, ENTRY_POINT_GROUP, registry

        infos = [*sorted(registry().values(), key=lambda i: i.name), CUSTOM]
        if fmt == "json":
            print_json({"group": ENTRY_POINT_GROUP, "assertions": [i.to_json() for i in infos]})
            return 0
        width = max(len(i.name) for i in infos)
        click.echo(f"assertion types ({ENTRY_POINT_GROUP}):")
        for info in infos:
            click.echo(
                f"  {info.name:<{width}}  {info.scope:<5}  {info.value:<7}  {info.origin}"
                f"  ({info.target})"
            )
        return 0

    run_command(fmt, body)
