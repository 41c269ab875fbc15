"""Keyed signatures for the documents an auditor trusts: DLQ index, state, evidence.

A ``sha256`` checksum proves a document is whole, not who wrote it: anyone who can write the
work dir can rebuild a consistent one. With a key, those documents also carry

    "signature": {"alg": "hmac-sha256", "key_id": "...", "value": "<hex>"}

an HMAC-SHA256 over the same canonical bytes as ``sha256`` (the document without ``sha256``
and ``signature``). The key comes from the environment only, never from a manifest:
``DPONE_SIGNING_KEY`` (the key's text) or ``DPONE_SIGNING_KEY_FILE`` (a file holding it);
its id is ``DPONE_SIGNING_KEY_ID`` or the first 16 hex digits of the key's SHA-256.
``DPONE_SIGNING_KEYS_FILE`` names a JSON object ``{"<key_id>": "<key>", ...}`` of retired keys
that still verify (rotation); only the current key signs. No key is ever printed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from dpone.canonical import canonical_json
from dpone.errors import ConfigError, DponeError, Stage
from dpone.records import frozen

ALG = "hmac-sha256"
MEMBER = "signature"
ENV_KEY = "DPONE_SIGNING_KEY"
ENV_KEY_FILE = "DPONE_SIGNING_KEY_FILE"
ENV_KEY_ID = "DPONE_SIGNING_KEY_ID"
ENV_KEYS_FILE = "DPONE_SIGNING_KEYS_FILE"
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_KEY_FILE_BYTES = 1024 * 1024


class SigningConfigError(ConfigError):
    """The signing key settings are unusable (exit 2); the message never holds a key."""

    code = "DPONE_SIGNING_CONFIG"
    stage: Stage = "preflight"


class SignatureError(DponeError):
    """A document's signature is missing where required, malformed, or does not verify."""

    code = "DPONE_SIGNATURE_INVALID"
    stage: Stage = "runtime"
    exit_code = 1


@frozen
class SigningKey:
    """One HMAC key: the id its signatures name, and its secret (kept out of the repr)."""

    key_id: str
    secret: bytes = field(repr=False)


@frozen
class Keyring:
    """The key that signs (if any) and every key that verifies, by id."""

    current: SigningKey | None = None
    verifiers: Mapping[str, SigningKey] = field(default_factory=dict)

    @property
    def can_verify(self) -> bool:
        return bool(self.verifiers)


def key_id_of(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()[:16]


def _read_file(path: str, variable: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError:
        raise SigningConfigError(
            f"the file {variable} names cannot be read",
            fixes=(f"point {variable} at a readable file",),
        ) from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise SigningConfigError(f"the file {variable} names is too large to hold keys")
    return data


def _checked_id(key_id: str, variable: str) -> str:
    if not _KEY_ID.match(key_id):
        raise SigningConfigError(
            f"{variable} holds a key id that is not 1-64 characters of [A-Za-z0-9._-]",
            fixes=("use a short id such as 2026-q1",),
        )
    return key_id


def keyring_from(env: Mapping[str, str]) -> Keyring:
    """The keyring the environment describes; :class:`SigningConfigError` if it is unusable."""
    text, path = env.get(ENV_KEY), env.get(ENV_KEY_FILE)
    if text and path:
        raise SigningConfigError(
            f"both {ENV_KEY} and {ENV_KEY_FILE} are set",
            fixes=(f"set only one of {ENV_KEY} and {ENV_KEY_FILE}",),
        )
    secret = text.encode() if text else _read_file(path, ENV_KEY_FILE).strip() if path else b""
    if (text or path) and len(secret) < 16:
        raise SigningConfigError(
            "the signing key is shorter than 16 bytes",
            fixes=("use a random key of at least 32 bytes, e.g. `openssl rand -hex 32`",),
        )
    verifiers: dict[str, SigningKey] = {}
    retired = env.get(ENV_KEYS_FILE)
    if retired:
        try:
            listed = json.loads(_read_file(retired, ENV_KEYS_FILE))
        except ValueError:
            listed = None
        if not isinstance(listed, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in listed.items()
        ):
            raise SigningConfigError(
                f"the file {ENV_KEYS_FILE} names is not a JSON object of key id to key",
                fixes=('write it as {"<key_id>": "<key>", ...}',),
            )
        for key_id, value in listed.items():
            verifiers[key_id] = SigningKey(_checked_id(key_id, ENV_KEYS_FILE), value.encode())
    current = None
    if secret:
        given = env.get(ENV_KEY_ID)
        key_id = _checked_id(given, ENV_KEY_ID) if given else key_id_of(secret)
        current = SigningKey(key_id, secret)
        verifiers[key_id] = current
    return Keyring(current, verifiers)


_cached: tuple[tuple[str | None, ...], Keyring] | None = None


def keyring() -> Keyring:
    """The process environment's keyring (re-read when the variables change)."""
    global _cached
    names = (ENV_KEY, ENV_KEY_FILE, ENV_KEY_ID, ENV_KEYS_FILE)
    settings = tuple(os.environ.get(n) for n in names)
    if _cached is None or _cached[0] != settings:
        _cached = (settings, keyring_from(os.environ))
    return _cached[1]


def require_key() -> Keyring:
    """The keyring, which must hold a key that verifies (for ``--require-signature``)."""
    ring = keyring()
    if not ring.can_verify:
        raise SigningConfigError(
            "--require-signature needs a key to verify signatures with",
            code="DPONE_SIGNING_KEY_REQUIRED",
            fixes=FIXES["DPONE_SIGNING_KEY_REQUIRED"],
        )
    return ring


def configured() -> bool:
    """Whether this process has a key that verifies: then unsigned documents are refused by
    default wherever dpone acts on what it reads back (``--allow-unsigned`` opts out)."""
    return keyring().can_verify


def required(*, require_signature: bool = False, allow_unsigned: bool = False) -> bool:
    """Whether a command refuses unsigned documents.

    By default whenever a key is configured; ``--allow-unsigned`` opts out. The older
    ``--require-signature`` adds nothing once a key is configured; without one it is still a
    usage error (there is no key to verify with), never silently ignored.
    """
    if require_signature and allow_unsigned:
        raise SigningConfigError(
            "--require-signature and --allow-unsigned contradict each other",
            code="DPONE_USAGE",
            fixes=("pass at most one of --require-signature and --allow-unsigned",),
        )
    if require_signature:
        require_key()
        return True
    return not allow_unsigned and configured()


def signed_bytes(doc: Mapping[str, Any]) -> bytes:
    """The canonical bytes a signature (and the ``sha256``) covers."""
    return canonical_json({k: v for k, v in doc.items() if k not in ("sha256", MEMBER)})


def signature_of(doc: Mapping[str, Any], key: SigningKey) -> dict[str, str]:
    value = hmac.new(key.secret, signed_bytes(doc), hashlib.sha256).hexdigest()
    return {"alg": ALG, "key_id": key.key_id, "value": value}


def sign(doc: dict[str, Any], ring: Keyring | None = None) -> dict[str, Any]:
    """``doc`` with a ``signature`` member when a signing key is configured (in place)."""
    ring = keyring() if ring is None else ring
    doc.pop(MEMBER, None)
    if ring.current is not None:
        doc[MEMBER] = signature_of(doc, ring.current)
    return doc


def well_formed(signature: Any) -> bool:
    return (
        isinstance(signature, dict)
        and set(signature) == {"alg", "key_id", "value"}
        and signature["alg"] == ALG
        and isinstance(signature["key_id"], str)
        and bool(_KEY_ID.match(signature["key_id"]))
        and isinstance(signature["value"], str)
        and bool(_HEX.match(signature["value"]))
    )


def problem(
    doc: Mapping[str, Any], ring: Keyring, *, require: bool, what: str
) -> tuple[str, str] | None:
    """(code, message) when ``doc``'s signature does not hold; ``None`` when it does.

    A present signature is verified when the ring has any key; a missing one is a problem only
    when ``require`` is set. ``what`` names the document in the message.
    """
    signature = doc.get(MEMBER)
    if signature is None:
        if require:
            return "DPONE_SIGNATURE_MISSING", f"{what} is not signed"
        return None
    if not well_formed(signature):
        return "DPONE_SIGNATURE_INVALID", f"{what} carries a malformed signature"
    if not ring.can_verify:
        if require:
            return "DPONE_SIGNING_KEY_REQUIRED", f"no key is configured to verify {what}"
        return None
    key = ring.verifiers.get(signature["key_id"])
    if key is None:
        return (
            "DPONE_SIGNATURE_UNKNOWN_KEY",
            f"{what} is signed with a key id this process does not know",
        )
    if not hmac.compare_digest(signature_of(doc, key)["value"], signature["value"]):
        return "DPONE_SIGNATURE_INVALID", f"{what}'s signature does not verify"
    return None


FIXES: Mapping[str, tuple[str, ...]] = {
    "DPONE_SIGNATURE_MISSING": (
        f"write the documents with {ENV_KEY} (or {ENV_KEY_FILE}) set",
        "treat an unsigned document as forgeable by anyone who can write the work dir",
    ),
    "DPONE_SIGNATURE_INVALID": (
        "the document changed after it was signed, or was written without the key: "
        "restore it from trusted storage and investigate",
    ),
    "DPONE_SIGNATURE_UNKNOWN_KEY": (
        f"list the retired key in the JSON file {ENV_KEYS_FILE} names",
        "or investigate: the document may have been signed by someone else",
    ),
    "DPONE_SIGNING_KEY_REQUIRED": (f"set {ENV_KEY} or {ENV_KEY_FILE} to verify signatures",),
}


def check(doc: Mapping[str, Any], *, what: str, stage: Stage, require: bool = False) -> None:
    """Raise :class:`SignatureError` when ``doc``'s signature does not hold."""
    found = problem(doc, keyring(), require=require, what=what)
    if found is not None:
        code, message = found
        raise SignatureError(message, code=code, stage=stage, fixes=FIXES[code])


__all__ = [
    "ALG",
    "ENV_KEY",
    "ENV_KEYS_FILE",
    "ENV_KEY_FILE",
    "ENV_KEY_ID",
    "FIXES",
    "MEMBER",
    "Keyring",
    "SignatureError",
    "SigningConfigError",
    "SigningKey",
    "check",
    "configured",
    "key_id_of",
    "keyring",
    "keyring_from",
    "problem",
    "require_key",
    "required",
    "sign",
    "signature_of",
    "signed_bytes",
    "well_formed",
]
