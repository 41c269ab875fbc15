"""``python -m bench`` (``make bench``): every ``bench/bench_*.py`` module's ``run()``, in order.

Benchmarks compare dpone side by side, in one run, with what users would use instead, and
print ratios. ``python -m bench contracts dlq`` runs only the named ones.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )
    wanted = argv or names
    for name in wanted:
        if name not in names:
            print(f"unknown benchmark {name!r}; known: {', '.join(names)}", file=sys.stderr)
            return 2
        print(f"\n=== bench {name} ===", flush=True)
        importlib.import_module(f"bench.bench_{name}").run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
