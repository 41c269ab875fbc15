"""Names dpone puts into SQL: quoted identifiers, and short stable hashes for derived names."""

from __future__ import annotations

import hashlib

from dpone.connectors.errors import SinkSchemaError


def quote_ident(name: str) -> str:
    """A SQL identifier, double-quoted (DuckDB, PostgreSQL, SQLite): every name dpone puts
    into SQL goes through here, so reserved words, mixed case, spaces, dots, quotes and
    non-ASCII letters all stay one exact name."""
    if "\x00" in name:
        raise SinkSchemaError("an identifier contains a NUL character")
    return '"' + name.replace('"', '""') + '"'


def qualify(*parts: str) -> str:
    """``"catalog"."schema"."table"`` (or fewer parts), each part quoted."""
    return ".".join(quote_ident(part) for part in parts)


def short_hash(*parts: str, length: int = 16) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:length]
