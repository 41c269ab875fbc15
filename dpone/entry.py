"""The ``dpone`` command's entry point (and ``python -m dpone``'s).

The CLI imports click, pyarrow and DuckDB before any command can watch for signals; a Ctrl-C
in that moment ends the process with exit 130 and one line, not a traceback. Nothing has been
read or written yet.
"""

from __future__ import annotations

import contextlib
import os
import sys

from dpone.errors import EXIT_INTERRUPTED


def main() -> None:
    try:
        from dpone.cli.main import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("dpone: interrupted while starting; nothing was done\n")
        sys.exit(EXIT_INTERRUPTED)
    try:
        cli_main()
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    # Every command has closed what it opened (stores, sinks, locks) and its output is
    # flushed below; tearing the interpreter down (module by module, a last garbage
    # collection of a run's objects) would only add a sixth of a second to every command.
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (`dpone ... | head`): nothing left to keep.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code if isinstance(code, int) else 0)


__all__ = ["main"]
