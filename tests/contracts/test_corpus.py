"""The table-driven corpus (``corpus.py``): every type, every edge case, strict and lenient."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest

from dpone.contracts.convert import convert
from tests.contracts.corpus import CASES, SAME, R
from tests.contracts.helpers import same_value, spec_of

MODES = {"strict": False, "lenient": True}


def _expected(strict: Any, lenient: Any, mode: str) -> Any:
    if mode == "strict":
        return strict
    return strict if lenient == SAME else lenient


def _ids() -> list[str]:
    return [f"{kind}:{text!r}" for kind, text, _, _ in CASES]


def test_the_corpus_is_large_and_covers_every_type() -> None:
    assert len(CASES) >= 200
    kinds = {spec_of(k).type for k, *_ in CASES}
    assert kinds == {
        "integer",
        "float",
        "decimal",
        "boolean",
        "date",
        "time",
        "timestamp",
        "string",
        "json",
        "binary",
    }


@pytest.mark.parametrize("path", ["fast", "exact"])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(("kind", "text", "strict", "lenient"), CASES, ids=_ids())
def test_case(kind: str, text: str, strict: Any, lenient: Any, mode: str, path: str) -> None:
    """Alone in its chunk: the whole-column cast (fast) and the exact path must agree."""
    expected = _expected(strict, lenient, mode)
    conv = convert(
        pa.array([text], pa.string()),
        spec_of(kind),
        lenient=MODES[mode],
        fast_path=path == "fast",
    )
    (value,) = conv.values.to_pylist()
    failed = conv.failed is not None and conv.failed[0].as_py()
    if expected == R:
        assert failed, f"{text!r} should be rejected, got {value!r}"
        assert value is None
    else:
        assert not failed, f"{text!r} should be accepted as {expected!r}"
        assert same_value(value, expected), f"{text!r}: {value!r} != {expected!r}"


@pytest.mark.parametrize("mode", list(MODES))
def test_cases_together_equal_cases_alone(mode: str) -> None:
    """One array per type with every case (and NULLs between): rows do not influence each other."""
    by_kind: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for kind, text, strict, lenient in CASES:
        by_kind[kind].append((text, _expected(strict, lenient, mode)))
    for kind, cases in by_kind.items():
        texts: list[str | None] = []
        for text, _ in cases:
            texts += [text, None]
        conv = convert(pa.array(texts, pa.string()), spec_of(kind), lenient=MODES[mode])
        values = conv.values.to_pylist()
        failed = conv.failed.to_pylist() if conv.failed is not None else [False] * len(texts)
        for i, (text, expected) in enumerate(cases):
            assert values[2 * i + 1] is None
            assert not failed[2 * i + 1], "a NULL is never a type mismatch"
            if expected == R:
                assert failed[2 * i], (kind, text)
            else:
                assert same_value(values[2 * i], expected), (kind, text, values[2 * i])


def test_many_candidates_take_the_vectorized_repair() -> None:
    """Above SMALL_REPAIR candidates the lenient numeric repair is vectorized: same answers."""
    texts = [" 42", "+7", "007", "1e2", "3.0", "3.5", "1,0", "-0", " 9223372036854775808"] * 20
    ints = convert(pa.array(texts), spec_of("integer"), lenient=True)
    assert ints.values.to_pylist()[:9] == [42, 7, 7, 100, 3, None, None, 0, None]
    assert ints.failed is not None
    assert ints.failed.to_pylist()[:9] == [False] * 5 + [True, True, False, True]
    decs = convert(pa.array(texts), spec_of("decimal(20,1)"), lenient=True)
    assert [str(v) for v in decs.values.to_pylist()[:9]] == [
        "42.0",
        "7.0",
        "7.0",
        "100.0",
        "3.0",
        "3.5",
        "None",
        "0.0",
        "9223372036854775808.0",
    ]
