"""dpone runtime."""

from __future__ import annotations

import os
from collections.abc import Mapping


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a run resolves its secrets in: a copy of ``env``, or of the process's
    environment when none is given (a copy: later changes to either never reach the run)."""
    return dict(os.environ) if env is None else dict(env)


__all__ = ["environment"]
