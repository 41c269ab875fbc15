"""``@frozen`` (``dpone.records``) against ``@dataclass(frozen=True, slots=True)``: the same
instances, text, equality, hashes, errors and pickles, class by class."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import pkgutil
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

import dpone
from dpone.records import frozen


def _twins(body: dict[str, Any], annotations: dict[str, Any]) -> tuple[Any, Any]:
    """The same class body made by ``@frozen`` and by ``dataclass(frozen=True, slots=True)``."""

    def made(decorate: Any, name: str) -> Any:
        namespace = {**body, "__annotations__": dict(annotations), "__module__": __name__}
        cls = type(name, (), namespace)
        globals()[name] = decorate(cls)  # pickle finds a class by its module and name
        return globals()[name]

    return made(frozen, "Fast"), made(dataclass(frozen=True, slots=True), "Slow")


SHAPES: list[tuple[dict[str, Any], dict[str, Any], tuple[Any, ...]]] = [
    ({}, {}, ()),
    ({}, {"a": int}, (1,)),
    ({"b": "x"}, {"a": int, "b": str}, (1, "y")),
    ({"b": field(default=None, repr=False)}, {"a": int, "b": Any}, (1, [1, 2])),
    ({"b": field(default=0, compare=False)}, {"a": int, "b": int}, (1, 5)),
    ({"b": field(default=0, hash=False)}, {"a": int, "b": int}, (1, 5)),
    ({"b": field(default=0, compare=False, hash=True)}, {"a": int, "b": int}, (1, 5)),
    ({"b": field(default_factory=tuple)}, {"a": float, "b": tuple[int, ...]}, (float("nan"), ())),
]


def _outcome(action: Any, *values: object) -> tuple[str, object]:
    """What ``action(*values)`` gives: its result, or the kind of exception it raised."""
    try:
        return ("returned", action(*values))
    except Exception as exc:  # the kind of refusal is what is compared
        return ("raised", type(exc))


def _same(action: Any, fast: object, slow: object, *more: tuple[object, object]) -> None:
    """``action`` gives the same outcome on the ``@frozen`` instances as on the dataclass's."""
    fast_values = [fast, *(pair[0] for pair in more)]
    slow_values = [slow, *(pair[1] for pair in more)]
    assert _outcome(action, *fast_values) == _outcome(action, *slow_values)


@pytest.mark.parametrize(("body", "annotations", "args"), SHAPES)
def test_a_frozen_class_behaves_as_the_dataclass_it_replaces(
    body: dict[str, Any], annotations: dict[str, Any], args: tuple[Any, ...]
) -> None:
    fast_cls, slow_cls = _twins(body, annotations)
    fast, slow = fast_cls(*args), slow_cls(*args)
    assert repr(fast).replace("Fast", "Slow") == repr(slow)
    _same(hash, fast, slow)
    variants = [args]
    for position in range(len(args)):  # each field changed in turn: compared or not, hashed or not
        changed = list(args)
        changed[position] = 7
        variants.append(tuple(changed))
    for other in variants:
        pair = (fast_cls(*other), slow_cls(*other))
        _same(lambda a, b: a == b, fast, slow, pair)
        _same(lambda a, b: a != b, fast, slow, pair)
        _same(lambda a, b: hash(a) == hash(b), fast, slow, pair)
    assert fast_cls.__eq__(fast, slow) is NotImplemented  # another class: not equal
    assert fast != slow
    for name in [*annotations, "other"]:
        _same(lambda o, n=name: setattr(o, n, 1), fast, slow)
        _same(lambda o, n=name: delattr(o, n), fast, slow)
    for name in annotations:
        with pytest.raises(FrozenInstanceError):
            setattr(fast, name, 1)
    assert not hasattr(fast, "__dict__")
    assert fast_cls.__slots__ == slow_cls.__slots__
    assert fast_cls.__match_args__ == slow_cls.__match_args__
    assert [f.name for f in dataclasses.fields(fast_cls)] == list(annotations)
    back = pickle.loads(pickle.dumps(fast))
    assert type(back) is fast_cls
    assert repr(back) == repr(fast)
    _same(lambda o: pickle.loads(pickle.dumps(o)) == o, fast, slow)
    _same(lambda o: copy.deepcopy(o) == o, fast, slow)
    if args:
        first = next(iter(annotations))
        _same(lambda o: dataclasses.replace(o, **{first: args[0]}) == o, fast, slow)


def test_a_value_that_holds_itself_shows_three_dots_as_a_dataclass_does() -> None:
    fast_cls, slow_cls = _twins({}, {"items": list[Any]})
    fast, slow = fast_cls([]), slow_cls([])
    fast.items.append(fast)
    slow.items.append(slow)
    assert repr(fast).replace("Fast", "Slow") == repr(slow) == "Slow(items=[...])"
    assert repr(fast) == repr(fast)  # the guard is released after each repr


def test_a_subclass_compares_and_hashes_over_its_own_fields() -> None:
    @frozen
    class Base:
        """A base record."""

        a: int

    @frozen
    class Child(Base):
        """A record that adds a field."""

        b: int = 0

    assert Child(1, 2) == Child(1, 2)
    assert Child(1, 2) != Child(1, 3)
    assert Child(1) != Base(1)
    assert Base(1) != Child(1)
    assert hash(Child(1, 2)) == hash((1, 2))
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")


def test_a_class_with_its_own_methods_keeps_the_dataclass_rules() -> None:
    @frozen
    class Own:
        """Equal to every other instance."""

        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own)

    # dataclass makes a frozen class with its own __eq__ hashable from its fields
    assert Own(1) == Own(2)
    assert hash(Own(1)) == hash((1,))
    assert Own.__eq__.__qualname__.endswith("Own.__eq__")  # its own method, kept
    assert "Own.__repr__" in Own.__repr__.__qualname__  # made by dataclass, for Own


def _dpone_modules() -> list[str]:
    names = [
        m.name
        for m in pkgutil.walk_packages(dpone.__path__, "dpone.")
        if not m.name.endswith("__main__")
    ]
    return sorted(names)


def test_every_frozen_class_of_dpone_is_hashable_comparable_and_slotted() -> None:
    seen = 0
    for name in _dpone_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if not (isinstance(value, type) and dataclasses.is_dataclass(value)):
                continue
            if value.__module__ != name or not value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
                continue
            seen += 1
            assert "__slots__" in value.__dict__, value
            assert value.__hash__ is not None, value
            assert value.__eq__ is not object.__eq__, value
            assert value.__repr__ is not object.__repr__, value
    assert seen > 100  # dpone's frozen classes were found (all of them made by @frozen)
