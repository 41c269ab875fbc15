"""Row predicates for the product_events pipeline (see manifest.yaml, quality.assertions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KNOWN_KINDS = frozenset({"signup", "login", "logout", "purchase", "page_view"})


def known_kind(row: Mapping[str, Any]) -> bool:
    """True when the event's kind is one the dashboards know; new kinds need a dashboard first."""
    return row.get("kind") in KNOWN_KINDS
