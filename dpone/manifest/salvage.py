"""What of a manifest with schema errors the semantic passes may still read (SPEC §2:
validation reports every error at once).

A schema error must not hide the errors of the parts of the document it does not touch: a
bad key under ``sink`` says nothing about a predicate that does not import. The document is
*salvaged*: the values the schema refuses and the keys it does not know are removed (the
defaults pass then fills what it can), and a check runs only when none of its inputs
(:data:`dpone.manifest.passes.STATIC_INPUTS`) holds a refused value or a missing required key:
a check over a repaired input would report errors the user did not write.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable
from typing import Any

from dpone.manifest.pointers import pointer_tokens


def salvaged(document: dict[str, Any], remove: Iterable[str]) -> dict[str, Any] | None:
    """``document`` without the values at ``remove`` (None: the document itself is refused,
    nothing of it can be read)."""
    doc = copy.deepcopy(document)
    for pointer in sorted(remove, key=len, reverse=True):  # the deepest first
        if not pointer:
            return None
        *parents, last = pointer_tokens(pointer)
        node: Any = doc
        for token in parents:
            node = _child(node, token)
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(last, None)
        elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
            node[int(last)] = None  # keep the positions of the other items (their pointers)
    return doc


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return None


def touches(invalid: Collection[str], inputs: Iterable[str]) -> bool:
    """Whether an invalid pointer lies in, or above, one of ``inputs``."""
    for i in inputs:
        for p in invalid:
            if p == i or p.startswith(i + "/") or i.startswith(p + "/") or not p:
                return True
    return False


__all__ = ["salvaged", "touches"]
