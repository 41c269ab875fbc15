"""The ``dpone`` command's entry point (and ``python -m dpone``'s).

The CLI imports click, pyarrow and DuckDB before any command can watch for signals; a Ctrl-C
in that moment ends the process with exit 130 and one line, not a traceback. Nothing has been
read or written yet.
"""

from __future__ import annotations

import sys

from dpone.errors import EXIT_INTERRUPTED


def main() -> None:
    try:
        from dpone.cli.main import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("dpone: interrupted while starting; nothing was done\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()


__all__ = ["main"]
