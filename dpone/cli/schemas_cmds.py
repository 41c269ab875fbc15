"""``dpone schemas list|export``: the published JSON Schemas."""

from __future__ import annotations

from pathlib import Path

import click

from dpone.cli.output import FORMAT_OPTION, print_json, run_command
from dpone.errors import ConfigError


@click.group("schemas")
def schemas_group() -> None:
    """The published JSON Schemas (Draft 2020-12) of every dpone document."""


@schemas_group.command("list")
@FORMAT_OPTION
def list_cmd(fmt: str) -> None:
    """List the published schemas."""

    def body() -> int:
        from dpone.published import load_schema, schema_names

        names = schema_names()
        if fmt == "json":
            print_json({"schemas": [{"name": n, "id": load_schema(n)["$id"]} for n in names]})
        else:
            for name in names:
                click.echo(f"{name}  {load_schema(name).get('title', '')}")
        return 0

    run_command(fmt, body)


@schemas_group.command("export")
@click.argument("directory", type=click.Path(file_okay=False))
@FORMAT_OPTION
def export_cmd(directory: str, fmt: str) -> None:
    """Write every schema into DIRECTORY as <name>.schema.json (byte-for-byte)."""

    def body() -> int:
        from dpone.published import SCHEMA_SUFFIX, schema_names, schema_text

        target = Path(directory)
        try:
            target.mkdir(parents=True, exist_ok=True)
            written = []
            for name in schema_names():
                out = target / f"{name}{SCHEMA_SUFFIX}"
                out.write_bytes(schema_text(name))
                written.append(str(out))
        except OSError as exc:
            raise ConfigError(
                f"cannot write schemas to the directory ({exc.strerror})",
                code="DPONE_SCHEMAS_EXPORT_FAILED",
                stage="cli",
                fixes=("choose a writable directory",),
            ) from None
        if fmt == "json":
            print_json({"written": written})
        else:
            click.echo(f"wrote {len(written)} schemas to {directory}")
        return 0

    run_command(fmt, body)
