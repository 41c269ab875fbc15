"""The assertion registry: built-ins plus every ``dpone.assertion`` entry point.

The compiler checks a manifest against it statically (names, scope, columns, config), the
engine instantiates from it, and ``dpone plugins list`` shows it with where each came from.
The built-ins register through dpone's own entry points; they are also listed here so a
source checkout that was never installed still knows them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from typing import Any

from dpone.assertions.builtins import BUILTINS
from dpone.assertions.spec import Scope, ValueKind
from dpone.logs import get_logger
from dpone.records import frozen

ENTRY_POINT_GROUP = "dpone.assertion"

log = get_logger("dpone.assertions")


def _no_problems(params: Mapping[str, Any]) -> list[str]:
    return []


@frozen
class AssertionTypeInfo:
    """One registered assertion type: scope, value kind, origin, and how to build and check it."""

    name: str
    scope: Scope
    value: ValueKind
    origin: str = "dpone (built-in)"
    target: str = ""
    factory: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    check_config: Callable[[Mapping[str, Any]], list[str]] = field(
        default=_no_problems, compare=False, repr=False
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.scope,
            "value": self.value,
            "origin": self.origin,
            "target": self.target,
        }


def info_of(cls: Any, origin: str, target: str) -> AssertionTypeInfo:
    return AssertionTypeInfo(
        name=str(cls.name),
        scope=cls.scope,
        value=cls.value_kind,
        origin=origin,
        target=target,
        factory=cls,
        check_config=cls.check_config,
    )


BUILTIN_TYPES: dict[str, AssertionTypeInfo] = {
    cls.name: info_of(cls, "dpone (built-in)", f"{cls.__module__}:{cls.__qualname__}")
    for cls in BUILTINS
}
CUSTOM = AssertionTypeInfo("custom", "row", "any", target="module:attr predicates")


@functools.cache
def registry() -> dict[str, AssertionTypeInfo]:
    """Built-ins, then entry points (a third-party name may not shadow a built-in)."""
    # Imported here: importlib.metadata (and the email parser it brings) costs about 10 ms,
    # and only a manifest naming a type that is not built in gets here.
    from importlib import metadata

    found = dict(BUILTIN_TYPES)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_TYPES and ep.value == BUILTIN_TYPES[ep.name].target:
            continue
        dist = ep.dist
        origin = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
        if ep.name in found:
            log.warning("plugin.shadowing_refused", name=ep.name, origin=origin)
            continue
        try:
            cls = ep.load()
            info = info_of(cls, origin, ep.value)
        except Exception as exc:  # a broken plugin must not break dpone
            log.warning("plugin.load_failed", name=ep.name, origin=origin, error=type(exc).__name__)
            continue
        if info.name != ep.name or info.scope not in ("row", "batch"):
            log.warning("plugin.invalid", name=ep.name, origin=origin)
            continue
        found[ep.name] = info
    return found


class Registered(Mapping[str, AssertionTypeInfo]):
    """:func:`registry` read on first use: compiling or running a manifest without
    assertions, or with built-in ones only, never scans the installed distributions' entry
    points (a plugin cannot shadow a built-in name)."""

    def __getitem__(self, name: str) -> AssertionTypeInfo:
        builtin = BUILTIN_TYPES.get(name)
        return builtin if builtin is not None else registry()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registry())

    def __len__(self) -> int:
        return len(registry())
