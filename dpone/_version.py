"""dpone's version: the one place it is written (pyproject.toml reads it from here).

A constant, not ``importlib.metadata.version("dpone")``: that import (with the email parser
it brings) was a tenth of what every ``dpone`` command spent before doing anything.
"""

__version__ = "0.1.0"
