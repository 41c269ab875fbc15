"""``@frozen``: dpone's immutable value classes, ``@dataclass(frozen=True, slots=True)`` made
cheaper to define.

On Python 3.11 ``dataclass`` writes each method it adds as source text and compiles it with
``exec``, one compile per method: a frozen, slotted class gets six (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), about half a
millisecond a class. A ``dpone run`` defines over a hundred of them before it reads a row, so
that was some 0.06 s of every command's start. ``frozen`` lets ``dataclass`` write the
methods that depend on the class's shape (``__init__``, and the frozen ``__setattr__`` and
``__delattr__``) and gives ``__repr__``, ``__eq__`` and ``__hash__`` as closures over the
class's field names, made without compiling anything: about 40% less per class.

The methods behave as ``dataclass``'s do: the same ``repr`` text (``Name(field=value, ...)``,
``...`` for a value that contains itself), equality only with an instance of the very same
class over the fields with ``compare=True`` (else ``NotImplemented``), and the hash of the
same tuple of the fields that count for it. A class that defines any of the three itself is
handed to ``dataclass`` unchanged, so that its own rules apply (``tests/test_records.py``
checks both against ``dataclass``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_OWN = ("__repr__", "__eq__", "__hash__")
# What a repr in progress is showing, per thread: a value that contains itself shows "...".
_showing = threading.local()


# Type checkers read ``@frozen`` as the dataclass it makes (fields, ``__init__``, frozen).
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[T]) -> type[T]:
    """``cls`` as ``@dataclass(frozen=True, slots=True)`` makes it (see the module)."""
    if any(name in cls.__dict__ for name in _OWN):
        return dataclasses.dataclass(frozen=True, slots=True)(cls)
    made: Any = dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)(cls)
    fields = dataclasses.fields(made)
    compared = _values([f.name for f in fields if f.compare])
    hashed = _values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fields if f.repr)
    methods = {
        "__repr__": _repr(shown),
        "__eq__": _eq(compared),
        "__hash__": lambda self: hash(hashed(self)),
    }
    for name, method in methods.items():
        setattr(made, name, method)
    return made  # type: ignore[no-any-return]


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of ``names``' values of an instance (``attrgetter``, in C)."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return attrgetter(*names)


def _eq(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        showing: set[int] | None = getattr(_showing, "ids", None)
        if showing is None:
            showing = _showing.ids = set()
        key = id(self)
        if key in showing:
            return "..."
        showing.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            showing.discard(key)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


__all__ = ["frozen"]
