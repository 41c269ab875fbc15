"""JSON pointers (RFC 6901) into a manifest document: how every error names its place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def escape_pointer_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(parent: str, token: str | int) -> str:
    return f"{parent}/{escape_pointer_token(str(token))}"


def pointer_tokens(pointer: str) -> list[str]:
    """The unescaped tokens of ``pointer`` (``""``, the whole document, has none)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def string_values(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """Every string below ``value`` (which sits at ``pointer``), with its own pointer."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from string_values(sub, join_pointer(pointer, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from string_values(sub, join_pointer(pointer, i))
    elif isinstance(value, str):
        yield pointer, value
