"""Static checks of the dlt-backed source types (``rest_api``, ``dlt``) that the schema
cannot express: their references and credentials, the incremental hand-over, and dlt itself
being installed.

Validating never imports dlt (``dpone validate`` of any manifest stays free of its import
cost, and validating never runs code): :func:`check_installed` only looks for its module spec.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext
from dpone.manifest.dltblocks import DLT_SOURCE_TYPES, reference_roots
from dpone.manifest.pointers import string_values
from dpone.manifest.secrets import inline_secret, malformed_reference, only_references

DLT_NOT_INSTALLED = "DPONE_DLT_NOT_INSTALLED"
INSTALL_HINT = "install dlt: pip install 'dpone[dlt]' (or pip install dlt)"

#: Keys whose value is a credential: written only as ``${ENV_VAR}`` references. (A dlt
#: ``credentials`` argument may be a password-free path such as ``sqlite:///x.db``: like every
#: other string it is refused only when it carries a password, see ``inline_secret``.)
SECRET_KEYS = frozenset({"token", "api_key", "password", "client_secret", "access_token", "secret"})
_PLACEHOLDER = "{incremental."


def _at(doc: dict[str, Any], pointer: str) -> Any:
    node: Any = doc
    for part in pointer.strip("/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def check_dlt_source(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    """References and credentials of a rest_api / dlt source; the incremental hand-over."""
    source = doc["source"]
    if source.get("type") not in DLT_SOURCE_TYPES:
        return []
    errors = []
    for root in reference_roots(doc):
        for pointer, text in string_values(_at(doc, root), root):
            key = pointer.rsplit("/", 1)[-1].lower()
            if malformed_reference(text):
                errors.append(
                    ctx.error(
                        "DPONE_MANIFEST_SECRET_REFERENCE",
                        "malformed ${ENV_VAR} reference",
                        pointer,
                        fixes=("write references as ${NAME} with letters, digits and underscores",),
                    )
                )
            elif (key in SECRET_KEYS and not only_references(text)) or inline_secret(text):
                errors.append(
                    ctx.error(
                        "DPONE_MANIFEST_INLINE_SECRET",
                        f"'{key}' holds a credential; secrets never live in a manifest",
                        pointer,
                        fixes=(
                            "move the credential to an environment variable and write ${NAME}",
                            f'e.g. {key}: "${{API_TOKEN}}"',
                        ),
                    )
                )
    if source["type"] == "rest_api":
        errors.extend(_rest_api_checks(source, ctx))
    return errors


def _rest_api_checks(source: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    errors = []
    base_url = source["client"]["base_url"]
    if inline_secret(base_url):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_INLINE_SECRET",
                "client.base_url holds a credential; secrets never live in a manifest",
                "/source/client/base_url",
                fixes=("authenticate with client.auth and a ${NAME} reference instead",),
            )
        )
    endpoint = source["resource"].get("endpoint")
    if isinstance(endpoint, dict) and "incremental" in endpoint:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "dpone sets dlt's incremental itself, from source.incremental and the committed "
                "cursor",
                "/source/resource/endpoint/incremental",
                at_key=True,
                fixes=(
                    "move cursor_path to source.incremental.cursor_column (and initial_value "
                    "next to it)",
                    'send the cursor in a parameter: params: {since: "{incremental.start_value}"}',
                ),
            )
        )
    uses = [
        p
        for p, text in string_values(endpoint, "/source/resource/endpoint")
        if _PLACEHOLDER in text
    ]
    incremental = source.get("incremental")
    if uses and incremental is None:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "the endpoint uses {incremental...} but the source has no incremental cursor",
                uses[0],
                fixes=("add source.incremental: {cursor_column: ..., initial_value: ...}",),
            )
        )
    elif uses and incremental is not None and incremental.get("initial_value") is None:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "the endpoint sends {incremental...} but the first run would have no value to send",
                "/source/incremental",
                fixes=("set source.incremental.initial_value (the first run's lower bound)",),
            )
        )
    return errors


def dlt_installed() -> bool:
    """Whether ``import dlt`` can work, found without importing it."""
    if "dlt" in sys.modules:
        return sys.modules["dlt"] is not None
    try:
        return importlib.util.find_spec("dlt") is not None
    except (ImportError, ValueError):
        return False


def check_installed(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    """A dlt-backed source needs dlt installed (not a pure pass: it looks at the environment)."""
    if doc["source"].get("type") not in DLT_SOURCE_TYPES or dlt_installed():
        return []
    return [
        ctx.error(
            DLT_NOT_INSTALLED,
            f"source type {doc['source']['type']} needs the dlt package, which is not installed",
            "/source/type",
            fixes=(INSTALL_HINT,),
        )
    ]
