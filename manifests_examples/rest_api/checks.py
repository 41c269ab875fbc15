"""Row checks of the rest_api example (the manifest's folder is on sys.path)."""

from collections.abc import Mapping
from typing import Any

STATUSES = frozenset({"open", "paid", "shipped"})


def known_status(row: Mapping[str, Any]) -> bool:
    return row["status"] in STATUSES
