"""A loaded manifest against its JSON Schema (``dpone.manifest.v1``): every error at once, as
:class:`ErrorDetail`. The compiler runs it before its passes; ``dpone validate`` runs both.

jsonschema's own messages quote the offending value; a manifest value can be a credential
typed into the wrong key, so messages here are rebuilt from the schema keyword and never
echo a value.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from dpone.errors import ErrorDetail
from dpone.manifest.dltwords import dlt_word_fix
from dpone.manifest.loader import LoadedManifest, locate
from dpone.manifest.pointers import join_pointer
from dpone.published import is_valid, validator

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

MANIFEST_SCHEMA = "dpone.manifest.v1"

_RANGE_KEYWORDS = {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
}
_JSON_TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}
_EXTRAS = re.compile(r"\((.*) (?:was|were) unexpected\)\s*$", re.S)


def _close_matches(word: str, choices: list[str]) -> list[str]:
    """The allowed word closest to ``word``, if one is close (only a manifest with an error
    pays for importing difflib)."""
    import difflib

    return difflib.get_close_matches(word, choices, n=1)


def pointer_of(path: Iterable[Any]) -> str:
    pointer = ""
    for token in path:
        pointer = join_pointer(pointer, token)
    return pointer


def _describe(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _expected_types(schema_type: Any) -> str:
    names = {
        "object": "a mapping",
        "array": "a list",
        "string": "a string",
        "boolean": "a boolean (true or false)",
        "integer": "an integer",
        "number": "a number",
        "null": "null",
    }
    types = schema_type if isinstance(schema_type, list) else [schema_type]
    return " or ".join(names.get(str(t), str(t)) for t in types)


def _unexpected_keys(error: ValidationError) -> list[str]:
    match = _EXTRAS.search(error.message)
    if match is not None:
        try:
            parsed = ast.literal_eval(f"[{match.group(1)}]")
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, list) and all(isinstance(k, str) for k in parsed):
            return parsed
    # Fallback: every key the object schema does not name.
    instance = error.instance if isinstance(error.instance, dict) else {}
    known = _known_properties(error.schema)
    return [k for k in instance if k not in known and not k.startswith("x-")]


def _known_properties(schema: Any, instance: Any = None) -> set[str]:
    """Property names an object schema declares, including if/then and allOf branches; given
    the ``instance``, only the branches whose ``if`` it meets (a paginator's own keys)."""
    found: set[str] = set()
    if not isinstance(schema, dict):
        return found
    found.update(schema.get("properties", {}))
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []):
            found |= _known_properties(sub, instance)
    if "if" in schema and isinstance(instance, dict):
        branch = "then" if _valid_against(schema["if"], instance) else "else"
        found |= _known_properties(schema.get(branch), instance)
        return found
    for key in ("then", "else"):
        found |= _known_properties(schema.get(key))
    return found


def _leaf(error: ValidationError) -> ValidationError:
    """For oneOf/anyOf failures, the most relevant branch error."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        from jsonschema.exceptions import best_match

        best = best_match(error.context)
        if best is not None:
            return _leaf(best)
    return error


def _details(manifest: LoadedManifest, error: ValidationError) -> Iterator[ErrorDetail]:  # noqa: C901 (one branch per JSON Schema keyword)
    path = manifest.display_path
    error = _leaf(error)
    pointer = pointer_of(error.absolute_path)
    keyword = str(error.validator)

    def detail(
        code: str, message: str, ptr: str, *, at_key: bool, fixes: tuple[str, ...]
    ) -> ErrorDetail:
        line, column = locate(manifest, ptr, at_key=at_key)
        return ErrorDetail(
            code=code,
            message=message,
            stage="validate",
            pointer=ptr,
            path=path,
            line=line,
            column=column,
            fixes=fixes,
        )

    where = pointer or "the top level"
    if keyword in ("additionalProperties", "unevaluatedProperties"):
        known = sorted(_known_properties(error.schema, error.instance))
        for key in _unexpected_keys(error):
            if key in known:
                # Declared by the branch that applies, which failed on its value: that error
                # is reported on its own (unevaluatedProperties counts a failed branch's
                # keys as unevaluated).
                continue
            dlt_word = dlt_word_fix(pointer, key)
            close = _close_matches(key, known)
            fixes = [dlt_word] if dlt_word else []
            if close and not dlt_word:
                fixes.append(f"did you mean '{close[0]}'?")
            if known:
                fixes.append(f"keys allowed here: {', '.join(known)}")
            fixes.append("custom annotations are allowed under keys starting with 'x-'")
            yield detail(
                "DPONE_MANIFEST_UNKNOWN_KEY",
                f"unknown key '{key}' in {where}",
                join_pointer(pointer, key),
                at_key=True,
                fixes=tuple(fixes),
            )
        return
    if keyword == "required":
        missing = [k for k in error.validator_value if k not in (error.instance or {})]
        for key in missing:
            yield detail(
                "DPONE_MANIFEST_MISSING_KEY",
                f"the required key '{key}' is missing in {where}",
                pointer,
                at_key=True,
                fixes=(f"add '{key}:' to {where}",),
            )
        return
    if keyword == "type":
        yield detail(
            "DPONE_MANIFEST_TYPE",
            f"{where} must be {_expected_types(error.validator_value)}, "
            f"not {_describe(error.instance)}",
            pointer,
            at_key=False,
            fixes=(f"write {_expected_types(error.validator_value)} here",),
        )
        return
    if keyword in ("enum", "const"):
        allowed = error.validator_value if keyword == "enum" else [error.validator_value]
        shown = ", ".join(str(a) for a in allowed)
        close = (
            _close_matches(error.instance, [str(a) for a in allowed])
            if isinstance(error.instance, str)
            else []
        )
        hint: tuple[str, ...] = (f"did you mean '{close[0]}'?",) if close else ()
        yield detail(
            "DPONE_MANIFEST_ENUM",
            f"{where} must be one of: {shown}",
            pointer,
            at_key=False,
            fixes=(*hint, f"use one of: {shown}"),
        )
        return
    if keyword == "pattern":
        yield detail(
            "DPONE_MANIFEST_PATTERN",
            f"{where} does not match the required pattern {error.validator_value}",
            pointer,
            at_key=False,
            fixes=(_pattern_hint(pointer, str(error.validator_value)),),
        )
        return
    if keyword in _RANGE_KEYWORDS:
        yield detail(
            "DPONE_MANIFEST_RANGE",
            f"{where} is out of range ({keyword} {error.validator_value})",
            pointer,
            at_key=False,
            fixes=(f"use a value that satisfies {keyword} {error.validator_value}",),
        )
        return
    if keyword == "propertyNames" or "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad name with the keyword inside propertyNames, the name as
        # its instance and the mapping's path.
        if keyword == "propertyNames":
            names = error.instance if isinstance(error.instance, dict) else []
            bad = [k for k in names if not _valid_against(error.validator_value, k)]
        else:
            bad = [error.instance] if isinstance(error.instance, str) else []
        for key in bad:
            yield detail(
                "DPONE_MANIFEST_PATTERN",
                f"the key '{key}' is not an allowed name in {where}",
                join_pointer(pointer, key),
                at_key=True,
                fixes=(
                    "write it as X-... (HTTP names ignore case; keys starting with x- are "
                    "annotations dpone drops)"
                    if key.startswith("x-")
                    else "rename the key; names starting with __dpone__ are reserved",
                ),
            )
        return
    message = {
        "oneOf": f"{where} must match exactly one of its allowed forms",
        "anyOf": f"{where} does not match any of its allowed forms",
        "not": f"{where} uses a form that is not allowed",
        "uniqueItems": f"{where} lists the same item more than once",
        "dependentRequired": f"{where} lacks a key that another key requires",
    }.get(keyword, f"{where} breaks the schema rule '{keyword}'")
    yield detail(
        "DPONE_MANIFEST_SCHEMA",
        message,
        pointer,
        at_key=False,
        fixes=("see docs/manifest.md or the schema description of this key",),
    )


def _valid_against(schema: Any, value: Any) -> bool:
    from jsonschema import Draft202012Validator

    return bool(Draft202012Validator(schema).is_valid(value))


def _pattern_hint(pointer: str, pattern: str) -> str:
    if pointer == "/name":
        return "use 3 to 64 lowercase letters, digits or underscores, e.g. orders_daily"
    if pointer.endswith(("/callable", "/predicate", "/source/ref")):
        return "write module:attr (or module.attr), e.g. quality:known_kind"
    return f"write a value matching {pattern}"


def schema_errors(manifest: LoadedManifest) -> list[ErrorDetail]:
    """Every schema problem of the manifest, sorted by position."""
    if is_valid(manifest.document, MANIFEST_SCHEMA):
        return []  # the common case, answered without importing jsonschema
    found: list[ErrorDetail] = []
    seen: set[tuple[str, str | None, str]] = set()
    for error in validator(MANIFEST_SCHEMA).iter_errors(manifest.document):
        for d in _details(manifest, error):
            key = (d.code, d.pointer, d.message)
            if key not in seen:
                seen.add(key)
                found.append(d)
    found.sort(key=lambda d: (d.line or 0, d.column or 0, d.code))
    return found


def invalid_pointers(manifest: LoadedManifest) -> tuple[set[str], set[str]]:
    """Where the schema errors are, for the passes that still run after them
    (:mod:`dpone.manifest.salvage`): ``(invalid, unknown)``.

    ``invalid`` are values the schema refuses and keys it requires that are missing (their
    would-be pointer); ``unknown`` are keys it does not know, which can simply be dropped.
    """
    invalid: set[str] = set()
    unknown: set[str] = set()
    for error in validator(MANIFEST_SCHEMA).iter_errors(manifest.document):
        error = _leaf(error)
        pointer = pointer_of(error.absolute_path)
        keyword = str(error.validator)
        if keyword in ("additionalProperties", "unevaluatedProperties"):
            known = _known_properties(error.schema, error.instance)
            unknown.update(
                join_pointer(pointer, k) for k in _unexpected_keys(error) if k not in known
            )
        elif keyword == "required":
            present = error.instance if isinstance(error.instance, dict) else {}
            invalid.update(
                join_pointer(pointer, k) for k in error.validator_value if k not in present
            )
        else:
            invalid.add(pointer)
    return invalid, unknown
