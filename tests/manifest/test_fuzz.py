"""Generated and mutated manifests: every outcome is a plan or a DponeError, nothing else."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from dpone.errors import DponeError
from dpone.manifest.compiler import compile_text
from dpone.manifest.loader import load_manifest
from dpone.published import schema_errors
from tests.support.paths import example_manifests

EXAMPLE_DOCS = [load_manifest(p).document for p in example_manifests()]
FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["csv", "duckdb", "merge", "quarantine", "${X}", "${bad", "prod", "x-a"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def check_outcome(text: str) -> None:
    try:
        plan = compile_text(text, path="/fuzz/manifest.yaml")
    except DponeError as err:
        details = err.errors
    else:
        assert plan.fingerprint.startswith("sha256:")
        assert schema_errors(plan.to_json(), "dpone.plan.v1") == []
        return
    assert details, "an error must carry at least one detail"
    for detail in details:
        assert detail.code.startswith("DPONE_")
        assert schema_errors(detail.to_json(), "dpone.error.v1") == []


def dump_yaml(doc: Any) -> str:
    import io

    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(doc, out)
    return out.getvalue()


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    check_outcome(text)


@FUZZ
@given(st.dictionaries(st.sampled_from(["name", "source", "sink", "quality", "zz"]), json_values))
def test_random_documents(doc: dict[str, Any]) -> None:
    check_outcome(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS).decode(errors="replace"))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found.extend(_paths(v, (*prefix, i)))
    return found


@st.composite
def mutated_manifests(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLE_DOCS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths[1:] or paths))
        parent: Any = doc
        for token in path[:-1]:
            parent = parent[token]
        last = path[-1]
        action = draw(
            st.sampled_from(["delete", "replace", "unknown_key", "deep", "huge", "wrap", "dup"])
        )
        if action == "delete":
            del parent[last]
        elif action == "replace":
            parent[last] = draw(json_values)
        elif action == "unknown_key" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
        elif action == "deep":
            nested: Any = parent[last]
            for _ in range(draw(st.integers(min_value=2, max_value=120))):
                nested = [nested]
            parent[last] = nested
        elif action == "huge":
            parent[last] = "x" * draw(st.integers(min_value=1_000, max_value=200_000))
        elif action == "wrap":
            parent[last] = {"value": parent[last], "on_failure": draw(scalars)}
        elif action == "dup" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
    text = dump_yaml(doc)
    if draw(st.booleans()):
        # Raw text damage: cut, or splice in YAML syntax.
        pos = draw(st.integers(min_value=0, max_value=len(text)))
        text = text[:pos] + draw(
            st.sampled_from(["", ": :", "\t", "&a *a", "!tag ", "{[", "<<: *x"])
        )
    return text


@FUZZ
@given(mutated_manifests())
def test_mutated_examples(text: str) -> None:
    check_outcome(text)
