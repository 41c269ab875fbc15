"""``dpone run MANIFEST``: compile, run, print the report; exit codes of SPEC §9."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from dpone.cli.output import (
    ALLOW_ANY_IMPORT_OPTION,
    FORMAT_OPTION,
    print_document,
    run_command,
)
from dpone.errors import Interrupted


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM gets the same orderly stop as Ctrl-C: the lifecycle rolls back what is not
    # committed, and the process exits 130.
    raise KeyboardInterrupt


@click.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--run-id", help="Use this run id instead of a new ULID ([A-Za-z0-9._-]).")
@click.option(
    "--evolution",
    metavar="MODE|KEY=MODE,...",
    help="Override the manifest's evolution for this run: one mode for tables, columns and "
    "data_type (evolve, freeze, discard_row, discard_value), or e.g. columns=freeze.",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug-level logs on stderr.")
@ALLOW_ANY_IMPORT_OPTION
@FORMAT_OPTION
def run_cmd(
    manifest: str,
    run_id: str | None,
    evolution: str | None,
    verbose: bool,
    allow_any_import: bool,
    fmt: str,
) -> None:
    """Run MANIFEST: load the good rows, quarantine the bad, write evidence, advance state."""

    def body() -> int:
        from dpone.runtime.interrupts import InterruptWatch, tty_notice

        # From here on a first Ctrl-C or SIGTERM is a flag, even while the heavy imports and
        # the compile run (a KeyboardInterrupt raised inside a lazy import can be swallowed).
        previous = signal.signal(signal.SIGTERM, _interrupt)
        watch = InterruptWatch(notify=tty_notice if sys.stderr.isatty() else None)
        watch.start()
        progress = None
        if sys.stderr.isatty():  # elsewhere nothing is shown, and rich is not even imported
            from dpone.cli.progress import ProgressBar

            progress = ProgressBar.on(sys.stderr)
            # Started before the logs are configured: their lines then print above the bar.
            progress.start()
        try:
            from dpone import api
            from dpone.logs import configure

            configure(verbose=verbose)
            plan = api.compile(manifest, evolution=evolution, allow_any_import=allow_any_import)
            watch.check()
            report = api.run(
                plan, run_id=run_id, on_progress=progress, check=False, handle_signals=watch
            )
        except KeyboardInterrupt:
            raise Interrupted("the run was interrupted before it started loading") from None
        finally:
            watch.stop()
            signal.signal(signal.SIGTERM, previous)
            if progress is not None:
                progress.stop()
        from dpone.cli.run_text import render_text

        doc = report.to_json()
        print_document(fmt, doc, lambda: render_text(doc), newline=True)
        return report.exit_code

    # The run resumes the garbage collector itself, once its connectors are loaded.
    run_command(fmt, body, resumes_collector=True)
