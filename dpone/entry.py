"""The ``dpone`` command's entry point (and ``python -m dpone``'s).

The CLI imports click, pyarrow and DuckDB before any command can watch for signals; a Ctrl-C
in that moment ends the process with exit 130 and one line, not a traceback. Nothing has been
read or written yet.

On Linux the process first opts out of transparent huge pages (``prctl``, as Redis does for
its own process): a run allocates and frees chunk-sized Arrow buffers, and with THP each
first touch of a 2 MiB region is a 2 MiB zeroing in the kernel, or a wait while it compacts
memory for one. On the end-to-end benchmark (1,000,000 CSV rows, one core) that zeroing was a
fifth of the run's CPU time and its largest source of spread between runs; with 4 KiB pages
the run took 3-5% less time and varied by a tenth as much.
"""

from __future__ import annotations

import contextlib
import os
import sys

from dpone import startup
from dpone.errors import EXIT_INTERRUPTED

_PR_SET_THP_DISABLE = 41  # <linux/prctl.h>


def _without_huge_pages() -> None:
    """Opt this process (and any child) out of transparent huge pages, where Linux has them;
    anywhere else, or if the call fails, nothing changes."""
    if not sys.platform.startswith("linux") or _huge_pages_off():
        return
    import ctypes  # only now: its import is a few milliseconds of a 2-row run's start

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)


def _huge_pages_off() -> bool:
    """Whether this process is opted out already (its parent was, or set it for it): Linux
    5.0 and later say so in ``/proc/self/status``."""
    with contextlib.suppress(OSError, IndexError), open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"THP_enabled:"):
                return line.split()[1] == b"0"
    return False


def main() -> None:
    startup.pause()  # until the command's modules are loaded (dpone/startup.py)
    _without_huge_pages()
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
