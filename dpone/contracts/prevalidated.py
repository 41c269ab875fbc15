"""The mark a producer puts on a Parquet file it has already held to a contract.

A ``source.prevalidated: true`` pipeline loads such files through the sink's native path
without the row-by-row enforcement (docs/sources.md, "Prevalidated Parquet"). The mark is one
key-value of the Parquet file's metadata: :data:`MARK_KEY` holding a small JSON document with
the contract's fingerprint, so a file made for another contract (or another version of this
one) is refused before anything loads.

The fingerprint covers what decides the rows a table can hold: each declared column's name,
logical type (``bigint`` is ``integer``), type parameters and nullability, in declaration
order. Enforcement mode, coercion, evolution and inference do not change what a valid file
holds, so they are left out: tightening ``enforcement`` does not invalidate a producer's files.
"""

from __future__ import annotations

import json
from typing import Any

from dpone.canonical import checksum
from dpone.contracts.spec import ContractSpec

#: The Parquet key-value metadata key of the mark.
MARK_KEY = "dpone.prevalidated"
#: The mark's document: ``{"schema": MARK_SCHEMA, "contract_fingerprint": "sha256:..."}``.
MARK_SCHEMA = "dpone.prevalidated.v1"
_FINGERPRINT_SCHEMA = "dpone.contract-fingerprint.v1"
#: A mark is a few hundred bytes; anything much larger is not one dpone wrote.
MAX_MARK_BYTES = 4096


def contract_fingerprint(contract: ContractSpec) -> str:
    """``sha256:<hex>`` over the canonical (RFC 8785) JSON of the declared columns."""
    columns = []
    for column in contract.columns:
        doc: dict[str, Any] = {
            "name": column.name,
            "type": "integer" if column.type == "bigint" else column.type,
            "nullable": column.nullable,
        }
        for key in ("precision", "scale", "timezone"):
            value = getattr(column, key)
            if value is not None:
                doc[key] = value
        columns.append(doc)
    return checksum({"schema": _FINGERPRINT_SCHEMA, "columns": columns})


def mark_value(fingerprint: str) -> str:
    """The mark's value (JSON text) for a contract of ``fingerprint``."""
    doc = {"schema": MARK_SCHEMA, "contract_fingerprint": fingerprint}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def read_mark(raw: bytes) -> str | None:
    """The contract fingerprint a mark's bytes carry; None when they are not a mark (read
    back from a file: untrusted, so anything but the exact document is no mark at all)."""
    if len(raw) > MAX_MARK_BYTES:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past reason
        return None
    if not isinstance(doc, dict) or set(doc) != {"schema", "contract_fingerprint"}:
        return None
    found = doc["contract_fingerprint"]
    if doc["schema"] != MARK_SCHEMA or not isinstance(found, str) or len(found) != 71:
        return None
    return found


__all__ = [
    "MARK_KEY",
    "MARK_SCHEMA",
    "MAX_MARK_BYTES",
    "contract_fingerprint",
    "mark_value",
    "read_mark",
]
