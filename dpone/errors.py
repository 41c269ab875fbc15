"""Errors are data: one root exception, stable ``DPONE_*`` codes, structured fields.

Every expected failure a user can hit is a :class:`DponeError` (or a subclass). The CLI turns
it into a ``dpone.error.v1`` document and an exit code; a traceback never reaches the user.
Messages never contain row values: callers pass column names, codes and counts only.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from dpone.records import frozen

Severity = Literal["error", "warning"]
Stage = Literal[
    "load",
    "validate",
    "compile",
    "preflight",
    "recover",
    "read",
    "enforce",
    "assert",
    "dlq",
    "sink",
    "evidence",
    "state",
    "replay",
    "retention",
    "release_gate",
    "cli",
    "runtime",
]

ERROR_SCHEMA_ID = "dpone.error.v1"

# Exit codes of SPEC §9.
EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_CONFIG = 2
EXIT_REPLAY_EXECUTOR_REQUIRED = 4
EXIT_INTERRUPTED = 130


@frozen
class ErrorDetail:
    """One problem, as data: what a person needs to find and fix it, never a row value."""

    code: str
    message: str
    stage: Stage = "validate"
    severity: Severity = "error"
    pointer: str | None = None
    path: str | None = None
    line: int | None = None
    column: int | None = None
    fixes: tuple[str, ...] = ()
    #: the first failing rows of a run that failed on its data, by ``record_ref`` (no values)
    record_refs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": ERROR_SCHEMA_ID,
            "code": self.code,
            "stage": self.stage,
            "severity": self.severity,
            "message": self.message,
            "fixes": list(self.fixes),
        }
        for key in ("path", "pointer", "line", "column"):
            value = getattr(self, key)
            if value is not None:
                doc[key] = value
        if self.record_refs:
            doc["record_refs"] = list(self.record_refs)
        return doc

    def located(self) -> str:
        """``file:line:column`` (as much of it as is known)."""
        parts = [self.path or "-"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class DponeError(Exception):
    """Root of every expected dpone failure; subclasses fix ``code``, ``stage``, ``exit_code``."""

    code: str = "DPONE_ERROR"
    stage: Stage = "runtime"
    exit_code: int = EXIT_RUN_FAILED

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        stage: Stage | None = None,
        fixes: Sequence[str] = (),
        pointer: str | None = None,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        details: Sequence[ErrorDetail] = (),
        record_refs: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if stage is not None:
            self.stage = stage
        self.fixes = tuple(fixes)
        self.pointer = pointer
        self.path = path
        self.line = line
        self.column = column
        self.details: tuple[ErrorDetail, ...] = tuple(details)
        self.record_refs = tuple(record_refs)

    @property
    def errors(self) -> tuple[ErrorDetail, ...]:
        """Every problem this error stands for (several for an invalid manifest)."""
        if self.details:
            return self.details
        return (
            ErrorDetail(
                code=self.code,
                message=self.message,
                stage=self.stage,
                pointer=self.pointer,
                path=self.path,
                line=self.line,
                column=self.column,
                fixes=self.fixes,
                record_refs=self.record_refs,
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return self.errors[0].to_json() if len(self.errors) == 1 else self._summary_json()

    def _summary_json(self) -> dict[str, Any]:
        return ErrorDetail(
            code=self.code,
            message=self.message,
            stage=self.stage,
            path=self.path,
            fixes=self.fixes,
        ).to_json()

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class TransientError(DponeError):
    """Infrastructure that may work on retry; fails the run, never becomes a DLQ record.

    Retryable vs terminal is this type, not a flag: dpone itself retries nothing (dlt retries
    its HTTP requests, a scheduler reruns the run), so the only reader is code that asks
    ``isinstance(err, TransientError)``; every other ``DponeError`` is terminal.
    """


# --- configuration (exit 2) -------------------------------------------------------------------


class ConfigError(DponeError):
    code = "DPONE_CONFIG_INVALID"
    stage: Stage = "preflight"
    exit_code = EXIT_CONFIG


class UsageError(ConfigError):
    code = "DPONE_USAGE"
    stage = "cli"


class ManifestError(ConfigError):
    """A manifest that cannot become a plan. ``details`` lists every problem at once."""

    code = "DPONE_MANIFEST_INVALID"
    stage = "validate"
    #: what the compiler warns about besides the errors (a deprecated key), set by it
    warnings: tuple[ErrorDetail, ...] = ()

    @classmethod
    def collect(cls, errors: Iterable[ErrorDetail], path: str | None) -> ManifestError:
        errors = tuple(errors)
        first = errors[0]
        if len(errors) == 1:
            return cls(
                first.message,
                code=first.code,
                stage=first.stage,
                fixes=first.fixes,
                pointer=first.pointer,
                path=first.path,
                line=first.line,
                column=first.column,
                details=errors,
            )
        return cls(
            f"the manifest has {len(errors)} errors",
            stage=first.stage,
            path=path,
            details=errors,
        )


class SecretError(ConfigError):
    code = "DPONE_SECRET_UNRESOLVED"
    stage = "preflight"


# --- runtime (exit 1) ---------------------------------------------------------------------------


class PathIsSymlink(DponeError):
    """A symbolic link (or a non-folder) where dpone keeps a folder or file of its own.

    Below the work dir and a sink folder, dpone opens what it owns without following links
    (:func:`dpone.durable.open_below`), so a planted link can neither redirect a write nor
    make dpone delete anything outside: it is refused, naming the place, never followed.
    """

    code = "DPONE_PATH_IS_SYMLINK"
    stage = "preflight"


class Interrupted(DponeError):
    code = "DPONE_INTERRUPTED"
    stage = "runtime"
    exit_code = EXIT_INTERRUPTED


class InternalError(DponeError):
    """A bug, or a library failure dpone did not foresee, as the error a user reports."""

    code = "DPONE_INTERNAL"
    stage = "runtime"

    @classmethod
    def wrapping(cls, exc: BaseException, *, consequence: str = "") -> InternalError:
        """The error that stands for ``exc``: only its class name, since its text may quote a
        row value; ``consequence`` says what it left undone. With ``DPONE_DEBUG=1`` the
        traceback is printed to stderr first."""
        if os.environ.get("DPONE_DEBUG") == "1":
            traceback.print_exception(exc)
        message = f"an unexpected {type(exc).__name__}"
        return cls(
            f"{message} {consequence}" if consequence else message,
            fixes=(
                "rerun with DPONE_DEBUG=1 for the traceback and report it with the manifest "
                "(without secrets) and the dpone version",
            ),
        )


# Manifest and configuration codes. Stable: tests and users match on them.
MANIFEST_CODES: Mapping[str, str] = {
    "DPONE_MANIFEST_NOT_FOUND": "the manifest file does not exist or cannot be read",
    "DPONE_MANIFEST_TOO_LARGE": "the manifest is larger than the size limit",
    "DPONE_MANIFEST_ENCODING": "the manifest is not UTF-8 text",
    "DPONE_MANIFEST_YAML_SYNTAX": "the manifest is not well-formed YAML",
    "DPONE_MANIFEST_YAML_DUPLICATE_KEY": "a mapping repeats a key",
    "DPONE_MANIFEST_YAML_TAG": "the manifest uses a YAML tag",
    "DPONE_MANIFEST_YAML_ALIAS_LIMIT": "anchors and aliases expand beyond the limit",
    "DPONE_MANIFEST_YAML_TOO_DEEP": "the manifest nests deeper than the limit",
    "DPONE_MANIFEST_NOT_MAPPING": "the manifest's top level is not a mapping",
    "DPONE_MANIFEST_MULTIPLE_DOCUMENTS": "the file holds more than one YAML document",
    "DPONE_MANIFEST_UNKNOWN_KEY": "a key the schema does not define",
    "DPONE_MANIFEST_MISSING_KEY": "a required key is absent",
    "DPONE_MANIFEST_TYPE": "a value has the wrong type",
    "DPONE_MANIFEST_ENUM": "a value is not one of the allowed values",
    "DPONE_MANIFEST_PATTERN": "a value does not match the required pattern",
    "DPONE_MANIFEST_RANGE": "a number or length is out of range",
    "DPONE_MANIFEST_SCHEMA": "the manifest breaks another schema rule",
    "DPONE_MANIFEST_MERGE_WITHOUT_KEY": "strategy merge without unique_key",
    "DPONE_MANIFEST_MERGE_STRATEGY": "a merge setting that does not fit the mode or merge strategy",
    "DPONE_MANIFEST_PII_PRESERVE_IN_PRODUCTION": "pii_policy preserve in a production environment",
    "DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION": (
        "the deprecated quarantine.dir (a raw export of row values) in a production environment"
    ),
    "DPONE_MANIFEST_DEPRECATED_KEY": "a warning: a deprecated key (quarantine.dir)",
    "DPONE_MANIFEST_DECIMAL_SCALE": "a decimal's scale exceeds its precision",
    "DPONE_MANIFEST_COLUMN_NAME": "contract column names or their source keys collide",
    "DPONE_MANIFEST_DLQ_LIMIT": "a DLQ limit is out of its allowed range",
    "DPONE_MANIFEST_DLQ_DISABLED": "the DLQ is disabled while rows may be quarantined",
    "DPONE_MANIFEST_COERCION": "coercion none with enforcement coerce",
    "DPONE_MANIFEST_COERCE_APPEND": "enforcement coerce with strategy append",
    "DPONE_MANIFEST_NUL_BYTE": "a value holds a NUL byte",
    "DPONE_MANIFEST_PATH_OVERLAP": (
        "dlq.directory (or quarantine.dir) shares a folder with the work dir's other stores"
    ),
    "DPONE_MANIFEST_SECRET_REFERENCE": "a malformed ${ENV_VAR} reference",
    "DPONE_MANIFEST_INLINE_SECRET": "a credential written into the manifest",
    "DPONE_MANIFEST_PATH_ESCAPE": "a path leaves the manifest's folder where it must not",
    "DPONE_MANIFEST_SOURCE_OPTION": "a source option that does not fit the source type",
    "DPONE_MANIFEST_CHILD_TABLES_UNSUPPORTED": "normalize into child tables where they do not load",
    "DPONE_MANIFEST_SINK_OPTION": "a sink option that does not fit the sink type",
    "DPONE_MANIFEST_ENGINE_UNAVAILABLE": "engine dask without the dpone[dask] extra installed",
    "DPONE_MANIFEST_ENGINE_UNSUPPORTED": "a manifest feature engine dask does not support",
    "DPONE_MANIFEST_PREVALIDATED_UNSUPPORTED": "source.prevalidated with what it cannot honour",
    "DPONE_MANIFEST_UNIQUE_KEY_COLUMN": "a unique_key column the contract does not declare",
    "DPONE_MANIFEST_INCREMENTAL_COLUMN": "an incremental cursor the contract types as unorderable",
    "DPONE_MANIFEST_INCREMENTAL_LAG": "an incremental lag on a cursor type without arithmetic",
    "DPONE_DLT_NOT_INSTALLED": "the source type needs the dlt package, which is not installed",
    "DPONE_ASSERTION_UNKNOWN_TYPE": "an assertion type that is not registered",
    "DPONE_ASSERTION_UNKNOWN_COLUMN": "an assertion names a column absent from the contract",
    "DPONE_ASSERTION_QUARANTINE_BATCH": "quarantine on a batch-scoped assertion",
    "DPONE_ASSERTION_CONFIG": "an assertion's value does not fit its type",
    "DPONE_ASSERTION_PREDICATE_IMPORT": "a custom predicate does not import",
    "DPONE_MANIFEST_PREDICATE_NOT_FOUND": "a custom predicate's module or name is not found",
    "DPONE_MANIFEST_PREDICATE_SYNTAX": "a custom predicate's module does not parse",
    "DPONE_ASSERTION_PREDICATE_NOT_CALLABLE": "a custom predicate is not callable",
}
