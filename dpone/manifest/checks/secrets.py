"""Credentials and ``${ENV_VAR}`` references: secrets never live in a manifest, and a
reference stands only where dpone resolves it."""

from __future__ import annotations

from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest import dltblocks
from dpone.manifest.context import STORAGE, CompileContext, Document
from dpone.manifest.pointers import join_pointer
from dpone.manifest.secrets import inline_secret, malformed_reference

_CONNECTION_POINTERS = ("/source/connection", "/sink/connection", "/sink/credentials")


def check_secrets(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    errors = []
    sections = {"/source": doc["source"], "/sink": doc["sink"]}
    for pointer in _CONNECTION_POINTERS:
        section = sections[pointer.rsplit("/", 1)[0]]
        value = section.get(pointer.rsplit("/", 1)[1])
        if not isinstance(value, str):
            continue
        if malformed_reference(value):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SECRET_REFERENCE",
                    "malformed ${ENV_VAR} reference in the connection string",
                    pointer,
                    fixes=("write references as ${NAME} with letters, digits and underscores",),
                )
            )
        elif inline_secret(value):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_INLINE_SECRET",
                    "the connection string holds a credential; secrets never live in a manifest",
                    pointer,
                    fixes=(
                        "move the credential to an environment variable and write ${NAME}",
                        'e.g. connection: "${DPONE_PG_URL}"',
                    ),
                )
            )
    allowed = (*_CONNECTION_POINTERS, STORAGE, *dltblocks.reference_roots(doc))
    errors.extend(_stray_references(doc, "", ctx, allowed))
    return errors


def _stray_references(
    value: Any, pointer: str, ctx: CompileContext, allowed: tuple[str, ...]
) -> list[ErrorDetail]:
    """``${...}`` outside a connection string (or a dlt source's credentials, checked by
    ``dlt_source``, or ``source.options.storage``, checked by ``storage``) would silently stay
    literal: say so instead."""
    if pointer in allowed:
        return []
    if isinstance(value, dict):
        return [
            e
            for k, v in value.items()
            for e in _stray_references(v, join_pointer(pointer, k), ctx, allowed)
        ]
    if isinstance(value, list):
        return [
            e
            for i, v in enumerate(value)
            for e in _stray_references(v, join_pointer(pointer, i), ctx, allowed)
        ]
    if isinstance(value, str) and "${" in value:
        return [
            ctx.error(
                "DPONE_MANIFEST_SECRET_REFERENCE",
                "${...} references are resolved only in connection strings and "
                "source.options.storage",
                pointer,
                fixes=("write the value itself here, or move it into a connection string",),
            )
        ]
    return []
