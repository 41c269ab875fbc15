"""A plan file read back (``quarantine-replay --plan FILE``, ``retention apply FILE``).

A plan file is written by one command and read by another, so it is input: someone who can
write it can rebuild a consistent one (a plan id is only a checksum). It is read, parsed,
checked against its published schema and then against its keyed signature, which must be
there whenever a signing key is configured unless the caller opts out (``--allow-unsigned``).
Checking what the plan says against the store is the caller's business.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from dpone import signing
from dpone.errors import DponeError
from dpone.records import frozen


@frozen
class PlanFileKind:
    """How the errors about one kind of plan file read (``what``: "the replay plan")."""

    what: str
    schema: str
    error: type[DponeError]
    #: the code of a plan whose signature is missing (when required) or does not verify
    signature_code: str
    #: what the refused command did not do ("nothing was applied")
    untouched: str
    #: how to make a signed plan again, given the file's name
    remake: str
    #: the opt-out, and what it costs
    unsigned_fix: str


def read_plan_file(path: Path, kind: PlanFileKind, *, require_signature: bool) -> Any:
    """The JSON document of the plan file at ``path``, schema- and signature-checked."""
    from dpone.published import schema_errors

    what = f"{kind.what} {path.name}"
    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise kind.error(f"cannot read {what} ({type(exc).__name__})") from None
    except orjson.JSONDecodeError:
        raise kind.error(f"{what} is not JSON") from None
    errors = schema_errors(doc, kind.schema)
    if errors:
        raise kind.error(f"{what} breaks its schema: {errors[0]}")
    found = signing.problem(doc, signing.keyring(), require=require_signature, what=what)
    if found is not None:
        code, message = found
        raise kind.error(
            f"{message} ({code}); {kind.untouched}",
            code=kind.signature_code,
            path=path.name,
            fixes=(
                kind.remake.format(name=path.name),
                *signing.FIXES[code],
                kind.unsigned_fix,
            ),
        )
    return doc


__all__ = ["PlanFileKind", "read_plan_file"]
