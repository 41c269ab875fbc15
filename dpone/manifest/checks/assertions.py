"""The quality assertions: registered types, their configuration, the columns they name, and
no quarantine for a batch-scoped one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import (
    ASSERTIONS,
    RESERVED_ASSERTION_KEYS,
    CompileContext,
    Document,
    contract_columns,
)
from dpone.manifest.pointers import join_pointer


def check_assertions(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    assertions = doc["quality"]["assertions"]
    columns = contract_columns(doc)
    errors = []
    for key, value in assertions.items():
        if key in RESERVED_ASSERTION_KEYS:
            continue
        pointer = join_pointer(ASSERTIONS, key)
        info = ctx.assertion_types.get(key)
        if info is None:
            registered = ", ".join(sorted(ctx.assertion_types)) or "none"
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_UNKNOWN_TYPE",
                    f"unknown assertion type '{key}'; registered: {registered}",
                    pointer,
                    at_key=True,
                    fixes=(
                        "use a registered type, or install one under the 'dpone.assertion' "
                        "entry-point group (see `dpone plugins list`)",
                    ),
                )
            )
            continue
        policy = value.get("on_failure")
        if info.scope == "batch" and policy == "quarantine":
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_QUARANTINE_BATCH",
                    f"assertion '{key}' is batch-scoped: there are no rows to quarantine when "
                    "it fails",
                    f"{pointer}/on_failure",
                    fixes=("use fail or warn for a batch-scoped assertion",),
                )
            )
        elif info.scope == "batch" and policy is None and assertions["on_failure"] == "quarantine":
            errors.append(
                ctx.error(
                    "DPONE_ASSERTION_QUARANTINE_BATCH",
                    f"assertion '{key}' is batch-scoped and would inherit on_failure: "
                    "quarantine from the pipeline",
                    pointer,
                    at_key=True,
                    fixes=(f"give '{key}' its own on_failure: fail or warn",),
                )
            )
        problems = info.check_config({k: v for k, v in value.items() if k != "on_failure"})
        if problems:
            errors.extend(
                ctx.error(
                    "DPONE_ASSERTION_CONFIG",
                    problem,
                    _value_pointer(ctx, pointer),
                    fixes=(f"see `dpone plugins list` for what '{key}' takes",),
                )
                for problem in problems
            )
        elif info.value == "columns":
            errors.extend(_assertion_value(key, value["value"], pointer, columns, ctx))
    return errors


def _value_pointer(ctx: CompileContext, pointer: str) -> str:
    return f"{pointer}/value" if ctx.manifest.mark(f"{pointer}/value") else pointer


def _assertion_value(
    key: str, value: list[str], pointer: str, columns: Mapping[str, Any], ctx: CompileContext
) -> list[ErrorDetail]:
    """Columns named by an assertion must be declared (when the contract declares any)."""
    base = _value_pointer(ctx, pointer)
    if not columns:
        return []
    return [
        ctx.error(
            "DPONE_ASSERTION_UNKNOWN_COLUMN",
            f"assertion '{key}' names column '{column}', which the contract does not declare",
            f"{base}/{i}",
            fixes=(f"declare '{column}' under schema_contract.columns, or fix the name",),
        )
        for i, column in enumerate(value)
        if column not in columns
    ]
