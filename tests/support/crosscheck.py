"""Every schema verdict the suite asks for, given twice: by :mod:`dpone.validity` (what dpone
uses) and by jsonschema, which must agree.

dpone answers *is this document valid* with its own walker of the published schemas and
imports jsonschema only to say what is wrong. This plugin makes each in-process validation
of the whole suite (manifests compiled, state and journals read back, run reports checked)
a differential test of the two: a disagreement fails the test that caused it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from dpone import published, validity

_BY_ID = {published.load_schema(n)["$id"]: n for n in published.schema_names()}


class CrossChecked(validity.Checker):
    """:class:`dpone.validity.Checker` that asks jsonschema too and requires the same answer."""

    def check(self, schema: Any, root: Mapping[str, Any], value: Any) -> bool:
        ours = super().check(schema, root, value)
        name = _BY_ID[root["$id"]]
        theirs = bool(published.validator(name).evolve(schema=schema).is_valid(value))
        assert ours == theirs, (
            f"dpone.validity says {'valid' if ours else 'invalid'}, jsonschema "
            f"{'valid' if theirs else 'invalid'}, against {name}"
        )
        return ours


@pytest.fixture(autouse=True, scope="session")
def _schemas_cross_checked() -> Iterator[None]:
    checker = CrossChecked(published.by_id)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(published, "_checker", lambda: checker)
        yield
