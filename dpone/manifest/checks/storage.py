"""Static checks on ``source.options.storage``, the object store settings of a URI path.

The keys must apply to the path's store, credentials must be ``${ENV}`` references (a secret
never lives in a manifest), and every ``${...}`` must be well formed. Only the keys the
manifest wrote are checked (the schema fills ``anonymous`` for every store). Pure: nothing
here connects to a store or reads the environment; ``dpone.connectors.fs`` resolves the
references when the source is built.
"""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import STORAGE, CompileContext, Document
from dpone.manifest.pointers import join_pointer
from dpone.manifest.secrets import REFERENCE, malformed_reference
from dpone.sourcepaths import (
    CREDENTIAL_OPTIONS,
    STORAGE_OPTIONS,
    is_object_uri,
    source_path_problem,
    split_uri,
)


def check_storage(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    source = doc["source"]
    storage = source.get("options", {}).get("storage") if source.get("type") == "file" else None
    if storage is None:
        return []
    path = source["path"]
    if not is_object_uri(path):  # the schema gives a local path no storage of its own
        return [
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "options.storage applies to s3://, gs:// and az:// paths only",
                STORAGE,
                fixes=("remove options.storage, or read the files from an object store URI",),
            )
        ]
    if source_path_problem(path) is not None:
        return []  # the path itself is reported by check_source
    scheme = split_uri(path)[0]
    errors = []
    for key, value in storage.items():
        pointer = join_pointer(STORAGE, key)
        if ctx.manifest.mark(pointer) is None:
            continue  # a default
        if key not in STORAGE_OPTIONS[scheme]:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SOURCE_OPTION",
                    f"storage option '{key}' does not apply to {scheme}://",
                    pointer,
                    at_key=True,
                    fixes=(f"{scheme}:// takes {', '.join(STORAGE_OPTIONS[scheme])}",),
                )
            )
        elif isinstance(value, str) and malformed_reference(value):
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_SECRET_REFERENCE",
                    f"malformed ${{ENV_VAR}} reference in storage option '{key}'",
                    pointer,
                    fixes=("write references as ${NAME} with letters, digits and underscores",),
                )
            )
        elif key in CREDENTIAL_OPTIONS and REFERENCE.sub("", str(value)).strip():
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_INLINE_SECRET",
                    f"storage option '{key}' is a credential; secrets never live in a manifest",
                    pointer,
                    fixes=(
                        "move the credential to an environment variable and write ${NAME}",
                        f'e.g. {key}: "${{MY_{key.upper()}}}", or leave it out to use the '
                        "store's standard environment variables",
                    ),
                )
            )
    return errors


__all__ = ["check_storage"]
