"""What every compiler pass shares: the document type, the compile context, the shape of a
pass and of a check, and the pointers and keys of the document they read.

The bottom of the compiler's passes: it imports no pass and no check (``passes.py`` orders
them; the checks import this).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dpone.assertions.catalog import AssertionTypeInfo
from dpone.errors import ErrorDetail, Severity
from dpone.manifest.loader import LoadedManifest, locate
from dpone.manifest.salvage import touches
from dpone.records import frozen

Document = dict[str, Any]
PassResult = Document | list[ErrorDetail]

SINK = "/sink"
CONTRACT = "/sink/options/schema_contract"
DLQ = "/sink/options/dlq"
ASSERTIONS = "/quality/assertions"
STORAGE = "/source/options/storage"
#: The deprecated top-level ``quarantine: {dir: ...}`` (the legacy raw JSONL export).
LEGACY_QUARANTINE = "/quarantine"

#: The three settings of ``schema_contract.evolution`` (one word sets all three).
EVOLUTION_KEYS = ("tables", "columns", "data_type")
#: Keys of ``quality.assertions`` that are not an assertion type.
RESERVED_ASSERTION_KEYS = ("on_failure", "custom")


@frozen
class CompileContext:
    """What the passes and checks of one compile share: the manifest, the registered assertion
    types, whether predicates may name any module, and the pointers the schema refused."""

    manifest: LoadedManifest
    assertion_types: Mapping[str, AssertionTypeInfo]
    allow_any_import: bool = False
    #: pointers of values the schema refused (or required keys missing): the passes run on
    #: the rest of the document (``dpone.manifest.salvage``)
    invalid: frozenset[str] = frozenset()

    def error(
        self,
        code: str,
        message: str,
        pointer: str,
        *,
        at_key: bool = False,
        fixes: tuple[str, ...] = (),
        severity: Severity = "error",
    ) -> ErrorDetail:
        line, column = locate(self.manifest, pointer, at_key=at_key)
        return ErrorDetail(
            code=code,
            message=message,
            stage="compile",
            severity=severity,
            pointer=pointer,
            path=self.manifest.display_path,
            line=line,
            column=column,
            fixes=fixes,
        )


#: A pass takes the document and returns a richer one, or the errors that stop the compiler.
Pass = Callable[[Document, CompileContext], PassResult]
#: A check reads the document and returns its errors (none: the document passes).
Check = Callable[[Document, CompileContext], list[ErrorDetail]]


def contract_columns(doc: Document) -> dict[str, Any]:
    columns: dict[str, Any] = doc["sink"]["options"]["schema_contract"]["columns"]
    return columns


def dlq_directory_is_legacy(ctx: CompileContext) -> bool:
    """Whether the DLQ's folder came from the legacy ``quarantine.dir`` (the manifest writes
    no ``sink.options.dlq.directory``; ``normalize.map_legacy_keys``): an error about that
    folder points at the key the user wrote."""
    return (
        ctx.manifest.mark(f"{DLQ}/directory") is None
        and ctx.manifest.mark(f"{LEGACY_QUARANTINE}/dir") is not None
    )


def guarded(check: Check, doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """``check`` over a salvaged document: one that trips over a part the salvage removed
    (a required key of a section it does not name) reports nothing rather than crash; the
    schema error about that part is reported already."""
    try:
        return check(doc, ctx)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        return []


def all_at_once(checks: tuple[Check, ...], inputs: Mapping[Check, tuple[str, ...]]) -> Pass:
    """One pass running ``checks`` in order, every error of every check reported at once.

    After schema errors a check runs only when none of them lies in or above what it reads
    (``inputs``: JSON pointers; () = it walks every value it meets): a check over a repaired
    input would report errors the user did not write.
    """

    def check_static(doc: Document, ctx: CompileContext) -> PassResult:
        errors: list[ErrorDetail] = []
        for check in checks:
            if not ctx.invalid:
                errors.extend(check(doc, ctx))
            elif not touches(ctx.invalid, inputs[check]):
                errors.extend(guarded(check, doc, ctx))
        errors.sort(key=lambda e: (e.line or 0, e.column or 0, e.code))
        return errors or doc

    return check_static
