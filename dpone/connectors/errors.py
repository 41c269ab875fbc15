"""Connector failures as data: stable ``DPONE_SOURCE_*`` / ``DPONE_SINK_*`` codes.

Messages name files (relative), columns, row numbers, SQLSTATEs and exception class names,
never a row value, a driver's own message (it may quote a value or a host) or a credential.
A driver exception is never chained (``from None``): its text may quote a row value.
"""

from __future__ import annotations

from dpone.errors import ConfigError, DponeError, TransientError

# --- sources --------------------------------------------------------------------------------------


class SourceError(DponeError):
    """A source that cannot be read as configured; terminal (retrying reads the same thing)."""

    code = "DPONE_SOURCE_FAILED"
    stage = "read"


class SourceDecodeError(SourceError):
    """Bytes that are not rows of the declared format (bad CSV row, invalid JSON line)."""

    code = "DPONE_SOURCE_DECODE_FAILED"


class SourceRowTooLong(SourceError):
    """A line longer than the reader's ``max_row_bytes`` (terminal: the limit is the fix)."""

    code = "DPONE_SOURCE_ROW_TOO_LONG"


class SourceCrossOrigin(SourceError):
    """A request (a next-page link, a redirect) to another origin than the API's base URL."""

    code = "DPONE_SOURCE_CROSS_ORIGIN"


class SourcePaginationLoop(SourceError):
    """A paginator asked for a page it had asked for already: it would never end."""

    code = "DPONE_SOURCE_PAGINATION_LOOP"


class SourceMaxPages(SourceError):
    """More pages than the source's ``max_pages``."""

    code = "DPONE_SOURCE_MAX_PAGES"


class SourceResponseTooLarge(SourceError):
    """A response body larger than the source's ``max_response_bytes``."""

    code = "DPONE_SOURCE_RESPONSE_TOO_LARGE"


class SourceColumnNameCollision(SourceError):
    """Source column names a sink cannot hold apart (equal but for the letter case of A-Z, or
    a contract ``source:`` rename onto a name the source has too)."""

    code = "DPONE_SOURCE_COLUMN_NAME_COLLISION"


class SourceHeaderLooksLikeData(SourceError):
    """A CSV header whose names read as values: most likely a file without a header row.
    Its message never quotes the names (they may be a row's values)."""

    code = "DPONE_SOURCE_HEADER_LOOKS_LIKE_DATA"


class SourceTooManyColumns(SourceError):
    """More columns than ``runtime.max_columns`` (terminal: the limit, or the file, is the fix).

    A cap, not a guess: every step of a run costs something per column, so a file of a
    hundred thousand columns (a planted header, a broken export) must end at once, typed,
    instead of holding the run for hours."""

    code = "DPONE_SOURCE_TOO_MANY_COLUMNS"

    @classmethod
    def over(cls, where: str, limit: int, *, path: str | None = None) -> SourceTooManyColumns:
        return cls(
            f"{where} has more than {limit} columns (runtime.max_columns)",
            path=path,
            fixes=(
                "check the file: a header this wide is usually a broken export",
                "or raise runtime.max_columns in the manifest if the columns are real",
            ),
        )


class PrevalidatedFileError(SourceError):
    """A ``prevalidated`` source's file does not hold what its mark promises (or is no
    readable Parquet file): the run fails closed, nothing loaded. ``code`` says which check."""

    code = "DPONE_PREVALIDATED_FILE"


class SourceUnavailable(TransientError):
    """The source's server or file system failed underneath us; may work on retry."""

    code = "DPONE_SOURCE_UNAVAILABLE"
    stage = "read"


class SourceConfigError(ConfigError):
    """The source section cannot become a reader (exit 2)."""

    code = "DPONE_SOURCE_CONFIG"
    stage = "preflight"


class SourceNoFiles(SourceConfigError):
    """A file glob that matched no file."""

    code = "DPONE_SOURCE_NO_FILES"


class SourceBucketNotFound(SourceNoFiles):
    """An object store path whose bucket (or container) does not exist."""

    code = "DPONE_SOURCE_BUCKET_NOT_FOUND"


class SourceAccessDenied(SourceConfigError):
    """The object store refused the credentials (unknown key, wrong secret, no permission)."""

    code = "DPONE_SOURCE_ACCESS_DENIED"


class SourceObjectChanged(SourceUnavailable):
    """An object's bytes changed between its hashing and its read (a retry reads it anew)."""

    code = "DPONE_SOURCE_OBJECT_CHANGED"


# --- sinks ----------------------------------------------------------------------------------------


class SinkError(DponeError):
    """The sink refused the load for a reason a retry will not fix."""

    code = "DPONE_SINK_FAILED"
    stage = "sink"


class SinkSchemaError(SinkError):
    """Rows whose shape does not fit the load schema or the target table."""

    code = "DPONE_SINK_SCHEMA_MISMATCH"


class SinkConstraintViolation(SinkError):
    """Rows break a constraint of the target (unique, not-null, foreign key, check)."""

    code = "DPONE_SINK_CONSTRAINT_VIOLATION"


class SinkPermissionDenied(SinkError):
    """The sink's user may not do what the load needs (terminal: a grant is the fix)."""

    code = "DPONE_SINK_PERMISSION_DENIED"


class SinkMarkerInvalid(SinkError):
    """A commit marker or staging token that is not one dpone wrote (edited, planted, torn)."""

    code = "DPONE_SINK_MARKER_INVALID"


class SinkFileCorrupt(SinkError):
    """A committed table file the sink cannot read (not Parquet, truncated, damaged)."""

    code = "DPONE_SINK_FILE_CORRUPT"


class SinkConfigError(ConfigError):
    """The sink section or the load spec cannot work (exit 2)."""

    code = "DPONE_SINK_CONFIG"
    stage = "preflight"


class SinkUnavailable(TransientError):
    """Connection refused or dropped, server shutting down, out of memory."""

    code = "DPONE_SINK_UNAVAILABLE"
    stage = "sink"


class SinkReadOnly(TransientError):
    """The database or directory is read-only (or the transaction is)."""

    code = "DPONE_SINK_READ_ONLY"
    stage = "sink"


class SinkDiskFull(TransientError):
    code = "DPONE_SINK_DISK_FULL"
    stage = "sink"


class SinkLocked(TransientError):
    """Another writer holds the database (DuckDB file lock, serialization failure, deadlock)."""

    code = "DPONE_SINK_LOCKED"
    stage = "sink"


class DltNotInstalled(ConfigError):
    """A manifest uses a dlt source or sink, but dlt (or a recent enough one) is not installed."""

    code = "DPONE_DLT_NOT_INSTALLED"
    stage = "preflight"


# Every code this package raises; tests check each class's code is listed and unique.
CONNECTOR_CODES: dict[str, str] = {
    "DPONE_SOURCE_FAILED": "the source cannot be read as configured",
    "DPONE_SOURCE_DECODE_FAILED": "the source's bytes are not rows of the declared format",
    "DPONE_SOURCE_ROW_TOO_LONG": "a source line is longer than max_row_bytes",
    "DPONE_SOURCE_COLUMN_NAME_COLLISION": "source column names equal but for letter case",
    "DPONE_SOURCE_HEADER_LOOKS_LIKE_DATA": "a CSV header's names read as a data row's values",
    "DPONE_SOURCE_TOO_MANY_COLUMNS": "a source has more columns than runtime.max_columns",
    "DPONE_SOURCE_UNAVAILABLE": "the source's server or file system failed; may work on retry",
    "DPONE_SOURCE_CONFIG": "the source section cannot become a reader",
    "DPONE_SOURCE_NO_FILES": "the source path matched no file",
    "DPONE_SOURCE_BUCKET_NOT_FOUND": "the bucket of an object store source path does not exist",
    "DPONE_SOURCE_ACCESS_DENIED": "the object store refused the source's credentials",
    "DPONE_SOURCE_OBJECT_CHANGED": "a source object changed while it was read; may work on retry",
    "DPONE_SOURCE_QUERY_INVALID": "the source table or query is missing, invalid or writes",
    "DPONE_SOURCE_CALLABLE_IMPORT": "a python source's callable does not import",
    "DPONE_SOURCE_CALLABLE_NOT_CALLABLE": "a python source's callable is not callable",
    "DPONE_SOURCE_CALLABLE_FAILED": "a python or dlt source's code raised",
    "DPONE_SOURCE_HTTP_STATUS": "the API answered an error status a retry will not fix",
    "DPONE_SOURCE_CROSS_ORIGIN": "a next-page link or redirect names another origin than base_url",
    "DPONE_SOURCE_PAGINATION_LOOP": "the API's pagination asked for a page it had asked for",
    "DPONE_SOURCE_MAX_PAGES": "the API paginated past the source's max_pages",
    "DPONE_SOURCE_RESPONSE_TOO_LARGE": "an API response is larger than max_response_bytes",
    "DPONE_PREVALIDATED_FILE": "a prevalidated source's file is not a readable Parquet file",
    "DPONE_PREVALIDATED_NOT_MARKED": "a prevalidated source's file carries no dpone mark",
    "DPONE_PREVALIDATED_FINGERPRINT": "a prevalidated file was marked for another contract",
    "DPONE_PREVALIDATED_SCHEMA": "a prevalidated file's columns or types are not the contract's",
    "DPONE_PREVALIDATED_NULLS": "a prevalidated file holds NULL in a NOT NULL column",
    "DPONE_SINK_FAILED": "the sink refused the load",
    "DPONE_SINK_SCHEMA_MISMATCH": "rows do not fit the load schema or the target table",
    "DPONE_SINK_CONSTRAINT_VIOLATION": "rows break a unique, not-null or other constraint",
    "DPONE_SINK_PERMISSION_DENIED": "the sink's user lacks a privilege the load needs",
    "DPONE_SINK_MERGE_NULL_KEY": "a merge row has NULL in a unique_key column",
    "DPONE_SINK_LOAD_CLOSED": "the load was already committed or aborted",
    "DPONE_SINK_KEY_ALREADY_COMMITTED": "a load carries an idempotency key another load committed",
    "DPONE_SINK_RECOVERY_FAILED": "a committed load's files are missing; the sink needs attention",
    "DPONE_SINK_MARKER_INVALID": "a sink commit marker or staging token dpone did not write",
    "DPONE_SINK_FILE_CORRUPT": "a committed table file of the sink cannot be read",
    "DPONE_SINK_CONFIG": "the sink section or the load spec cannot work",
    "DPONE_SINK_UNAVAILABLE": "the sink's server is unreachable or failed; may work on retry",
    "DPONE_SINK_READ_ONLY": "the sink is read-only",
    "DPONE_SINK_DISK_FULL": "the sink's disk is full",
    "DPONE_SINK_LOCKED": "another writer holds the sink; may work on retry",
    "DPONE_DLT_NOT_INSTALLED": "the manifest uses dlt, which is not installed (or too old)",
}
