"""The manifest's defaults, read from the published JSON Schema: their one home.

:func:`apply_defaults` walks the schema alongside a document that already passed it and fills
every absent property that has a ``default`` keyword (deep-copied), descending into what it
filled, so ``sink.options`` appearing as ``{}`` brings its own defaults with it. A property
with ``x-dpone-default`` instead gets a value computed from others: a template whose
``{a.b}`` placeholders name values of the document once the constant defaults are in
(``{runtime.work_dir}/dlq``). Which branch of an ``if``/``then``/``else`` applies is decided
by the document itself, so the defaults of a file source's options, a decimal column's
``scale`` or the ``coercion`` of ``enforcement: coerce`` come from the branch that fits.

Keywords followed: ``$ref`` (local), ``properties``, ``additionalProperties`` and ``items``
(as schemas), ``allOf`` and ``if``/``then``/``else``. Defaults under ``anyOf``/``oneOf`` or
``patternProperties`` would be ambiguous and are not applied (the schema has none; the tests
check that every default is reached).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

TEMPLATE = "x-dpone-default"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")

#: Whether a document value is valid against a subschema (an ``if``).
Matches = Callable[[Mapping[str, Any], Any], bool]


def apply_defaults(
    document: Mapping[str, Any], schema: Mapping[str, Any], matches: Matches
) -> dict[str, Any]:
    """``document`` with every default of ``schema`` filled in; the input is not changed."""
    doc: dict[str, Any] = copy.deepcopy(dict(document))
    templates: list[tuple[dict[str, Any], str, str]] = []
    _Walker(schema, matches, templates).walk(schema, doc)
    for container, key, template in templates:
        container[key] = fill_template(template, doc)
    return doc


def fill_template(template: str, document: Mapping[str, Any]) -> str:
    """``template`` with each ``{a.b}`` replaced by that value of ``document``.

    Runs of ``/`` collapse to one, so a ``work_dir`` written as ``out/`` gives ``out/dlq``.
    """

    def value(match: re.Match[str]) -> str:
        node: Any = document
        for key in match.group(1).split("."):
            node = node[key]
        return str(node)

    return re.sub(r"/{2,}", "/", _PLACEHOLDER.sub(value, template))


class _Walker:
    def __init__(
        self,
        root: Mapping[str, Any],
        matches: Matches,
        templates: list[tuple[dict[str, Any], str, str]],
    ) -> None:
        self.root = root
        self.matches = matches
        self.templates = templates

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are followed for defaults, not {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        resolved: Mapping[str, Any] = node
        return resolved

    def walk(self, schema: Any, value: Any) -> None:
        if not isinstance(schema, Mapping):
            return  # true / false
        if "$ref" in schema:
            self.walk(self.resolve(schema), value)
        if isinstance(value, dict):
            self._object(schema, value)
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for item in value:
                self.walk(schema["items"], item)
        for sub in schema.get("allOf", ()):
            self.walk(sub, value)
        if "if" in schema:
            branch = schema.get("then") if self.matches(schema["if"], value) else schema.get("else")
            self.walk(branch, value)

    def _object(self, schema: Mapping[str, Any], value: dict[str, Any]) -> None:
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name, sub in properties.items():
            if name not in value:
                self._default(sub, value, name)
            if name in value:
                self.walk(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
            for name, item in value.items():
                if name not in properties and not any(p.search(name) for p in patterns):
                    self.walk(extra, item)

    def _default(self, schema: Mapping[str, Any], container: dict[str, Any], name: str) -> None:
        for candidate in (schema, self.resolve(schema)):
            if "default" in candidate:
                container[name] = copy.deepcopy(candidate["default"])
                return
            if TEMPLATE in candidate:
                self.templates.append((container, name, str(candidate[TEMPLATE])))
                return
