"""dpone's version: the one place it is written (pyproject.toml reads it from here).

A constant, not ``importlib.metadata.version("dpone")``: that import (with the email parser
it brings) was about 10 ms of the 0.14 s ``dpone validate`` takes.
"""

__version__ = "0.1.0"
