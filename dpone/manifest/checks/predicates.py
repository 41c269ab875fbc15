"""The check that every custom predicate resolves: found and parsed, never imported.

Not a pure pass (it reads the predicates' source files), so the compiler runs it after them;
after schema errors it still checks each predicate the schema accepted.
"""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import ASSERTIONS, CompileContext, Document
from dpone.manifest.salvage import touches


def check_predicates(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """Every custom predicate is found and defined, by reading its source: never imported.

    Validating a manifest (a pull request in CI) must not run the code it names. After
    schema errors, each predicate the schema accepted is still checked.
    """
    custom = doc.get("quality", {}).get("assertions", {}).get("custom", [])
    customs = [
        (f"{ASSERTIONS}/custom/{i}/predicate", entry["predicate"])
        for i, entry in enumerate(custom if isinstance(custom, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("predicate"), str)
    ]
    customs = [(p, ref) for p, ref in customs if not touches(ctx.invalid, (p,))]
    if not customs:
        return []  # without importing the locator (and importlib.metadata with it)
    from dpone.assertions.locate import check_reference

    errors = []
    for pointer, ref in customs:
        problem = check_reference(
            ref, ctx.manifest.path.parent, allow_any_import=ctx.allow_any_import
        )
        if problem is not None:
            errors.append(ctx.error(problem.code, problem.message, pointer, fixes=problem.fixes))
    return errors


__all__ = ["check_predicates"]
