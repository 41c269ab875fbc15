"""``${ENV_VAR}`` references in connection strings: parsed at compile time, resolved at run time.

A :class:`SecretRef` keeps the template the user wrote (which holds no secret); only
:meth:`SecretRef.resolve` produces the real value, and nothing renders that value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit

from dpone.errors import SecretError
from dpone.records import frozen

REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OPENING = "${"
_LIBPQ_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.I)
_SECRET_PARAMS = {"password", "pass", "pwd", "secret", "token", "sslpassword"}


@frozen
class SecretRef:
    """A string that may contain ``${NAME}`` references, resolved only when used."""

    template: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(REFERENCE.findall(self.template)))

    def resolve(self, env: Mapping[str, str]) -> str:
        _require_set(self.names, env)
        return REFERENCE.sub(lambda m: env[m.group(1)], self.template)

    def __repr__(self) -> str:
        return f"SecretRef({self.template!r})"


def resolve_all(refs: Mapping[str, SecretRef], env: Mapping[str, str]) -> dict[str, str]:
    """Each of ``refs`` resolved; every variable that is not set is named in one error."""
    _require_set([n for ref in refs.values() for n in ref.names], env)
    return {key: ref.resolve(env) for key, ref in refs.items()}


def require(refs: Iterable[SecretRef | None], env: Mapping[str, str]) -> None:
    """Every variable ``refs`` reference is set in ``env``; the unset ones named in one error."""
    _require_set([n for ref in refs if ref is not None for n in ref.names], env)


def _require_set(names: Iterable[str], env: Mapping[str, str]) -> None:
    missing = [n for n in dict.fromkeys(names) if n not in env]
    if missing:
        raise SecretError(
            f"environment variable(s) {', '.join(missing)} referenced by the manifest are not set",
            fixes=tuple(f"export {n}=... before running dpone" for n in missing),
        )


def malformed_reference(text: str) -> bool:
    """True when ``text`` has a ``${`` that does not open a well-formed reference."""
    start = 0
    while (i := text.find(_OPENING, start)) != -1:
        match = REFERENCE.match(text, i)
        if match is None:
            return True
        start = match.end()
    return False


def only_references(text: str) -> bool:
    """True when ``text`` is ``${VAR}`` references and nothing else (spaces aside)."""
    return REFERENCE.sub("", text).strip() == "" and bool(REFERENCE.search(text))


def inline_secret(text: str) -> bool:
    """True when a connection string carries a credential not written as a ``${VAR}`` reference."""
    if only_references(text):
        return False
    match = _LIBPQ_PASSWORD.search(text)
    if match is not None and not only_references(match.group(1).strip("'")):
        return True
    if "://" not in text:
        return False
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return False
    if password and not only_references(password):
        return True
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key.lower() in _SECRET_PARAMS and value and not only_references(value):
            return True
    return False
