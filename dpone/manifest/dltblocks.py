"""The dlt-backed source types (``rest_api``, ``dlt``): which they are, where their
``${ENV_VAR}`` references may stand, and those references.

The blocks use dlt's own vocabulary and are checked against dlt's config shape by the JSON
Schema (``$defs/restApi*``) and by ``checks/dlt_source.py``, never by importing dlt.
"""

from __future__ import annotations

from typing import Any

from dpone.manifest.pointers import string_values
from dpone.manifest.secrets import REFERENCE, SecretRef

DLT_SOURCE_TYPES = ("rest_api", "dlt")

#: Where a rest_api source may hold ``${ENV_VAR}`` references (everything below them).
_REST_API_ROOTS = (
    "/source/client/auth",
    "/source/client/headers",
    "/source/resource/endpoint/auth",
    "/source/resource/endpoint/headers",
    "/source/resource/endpoint/params",
)


def reference_roots(doc: dict[str, Any]) -> tuple[str, ...]:
    """Pointers under which the source may hold ``${ENV_VAR}`` references."""
    kind = doc.get("source", {}).get("type")
    if kind == "rest_api":
        return _REST_API_ROOTS
    if kind == "dlt":
        return ("/source/args",)
    return ()


def secret_refs(source: dict[str, Any]) -> tuple[SecretRef, ...]:
    """Every string of a dlt-backed source that holds a reference, as a :class:`SecretRef`."""
    if source.get("type") not in DLT_SOURCE_TYPES:
        return ()
    return tuple(SecretRef(text) for _, text in string_values(source, "") if REFERENCE.search(text))
