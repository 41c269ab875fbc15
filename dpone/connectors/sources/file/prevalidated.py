"""The checks of a prevalidated Parquet file, all from its footer (docs/sources.md,
"Prevalidated Parquet"): readable, marked, marked for this contract, exactly the contract's
columns and Arrow types, and no NULL in a NOT NULL column.

The file is input dpone did not write: its mark and metadata are parsed as untrusted bytes,
and every message names the file (as the manifest's glob spells it) and a column at most,
never a value.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dpone.connectors.errors import PrevalidatedFileError
from dpone.connectors.fs import sha256_file
from dpone.contracts.prevalidated import MARK_KEY, read_mark
from dpone.records import frozen

#: The checks every file passed, in the order they run (the evidence lists them).
CHECKS: tuple[str, ...] = ("readable", "marked", "fingerprint", "schema", "not_null")
_MARK = MARK_KEY.encode("ascii")


@frozen
class CheckedFile:
    """A file that passed every check: where it is, its rows and its bytes' SHA-256 (hex)."""

    partition: str
    path: Path
    rows: int
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.partition, "rows": self.rows, "sha256": self.sha256}


def check_file(partition: str, path: Path, schema: pa.Schema, fingerprint: str) -> CheckedFile:
    """``path`` checked against the contract's Arrow ``schema`` and ``fingerprint``; raises
    :class:`PrevalidatedFileError` with the failed check's code."""
    try:
        digest = sha256_file(path)
        with pq.ParquetFile(path) as pf:
            meta = pf.metadata
            _check_mark(partition, meta, fingerprint)
            _check_schema(partition, pf.schema_arrow, schema)
            _check_not_null(partition, pf, schema)
            rows = meta.num_rows
    except OSError as exc:
        raise PrevalidatedFileError(
            f"{partition}: cannot read the file ({type(exc).__name__})", path=partition
        ) from None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise PrevalidatedFileError(
            f"{partition}: not a readable Parquet file",
            path=partition,
            fixes=("replace the file with an intact copy from the producer",),
        ) from None
    return CheckedFile(partition, path, int(rows), digest)


def _check_mark(partition: str, meta: pq.FileMetaData, fingerprint: str) -> None:
    raw = (meta.metadata or {}).get(_MARK)
    found = None if raw is None else read_mark(raw)
    if found is None:
        raise PrevalidatedFileError(
            f"{partition}: the file carries no valid {MARK_KEY} mark in its Parquet metadata",
            code="DPONE_PREVALIDATED_NOT_MARKED",
            path=partition,
            fixes=(
                "write the key and value of dpone.prevalidated_metadata(manifest) into the "
                "file's metadata when the producer exports it (docs/sources.md)",
                "or drop source.prevalidated to enforce the contract row by row",
            ),
        )
    if found != fingerprint:
        raise PrevalidatedFileError(
            f"{partition}: the file was marked for another contract (its fingerprint is not "
            "this manifest's)",
            code="DPONE_PREVALIDATED_FINGERPRINT",
            path=partition,
            fixes=(
                "re-export the file with the mark of the current contract "
                "(dpone.prevalidated_metadata)",
                "or drop source.prevalidated to enforce the contract row by row",
            ),
        )


def _check_schema(partition: str, found: pa.Schema, expected: pa.Schema) -> None:
    """Exactly the contract's columns, in its order, of exactly its Arrow types (nullability
    is the statistics' matter: a producer may write a NOT NULL column as optional)."""
    problem = schema_problem(found, expected)
    if problem is not None:
        raise PrevalidatedFileError(
            f"{partition}: {problem}",
            code="DPONE_PREVALIDATED_SCHEMA",
            path=partition,
            fixes=(
                "write the file with the contract's Arrow schema, in its column order "
                "(dpone.compile(manifest) and the contract's types, docs/sources.md)",
            ),
        )


def schema_problem(found: pa.Schema, expected: pa.Schema) -> str | None:
    """What differs between a file's columns and the contract's (names and types only)."""
    if found.names != expected.names:
        missing = [n for n in expected.names if n not in found.names]
        extra = [n for n in found.names if n not in expected.names]
        if missing:
            return f"column {missing[0]!r} of the contract is not in the file"
        if extra:
            return f"column {extra[0]!r} of the file is not in the contract"
        return "the file's columns are not in the contract's order"
    for f, e in zip(found, expected, strict=True):
        if not f.type.equals(e.type):
            return f"column {f.name!r} is {f.type} in the file, the contract's is {e.type}"
    return None


def _check_not_null(partition: str, pf: pq.ParquetFile, schema: pa.Schema) -> None:
    """No NULL in a NOT NULL column: by each row group's null_count statistics, and by
    reading the column of a row group whose statistics do not say (never assumed)."""
    meta = pf.metadata
    required = [f.name for f in schema if not f.nullable]
    if not required:
        return
    leaves = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
    written_required = {f.name for f in pf.schema_arrow if not f.nullable}
    for name in required:
        if name in written_required:
            continue  # a REQUIRED Parquet column cannot hold a NULL
        leaf = leaves.get(name)
        for group in range(meta.num_row_groups):
            if _nulls(pf, group, name, leaf):
                raise PrevalidatedFileError(
                    f"{partition}: column {name!r} is NOT NULL in the contract, and row group "
                    f"{group} of the file holds NULL in it",
                    code="DPONE_PREVALIDATED_NULLS",
                    path=partition,
                    fixes=(
                        "fix the producer's export (the contract's NOT NULL holds for every row)",
                        "or drop source.prevalidated to quarantine such rows row by row",
                    ),
                )


def _nulls(pf: pq.ParquetFile, group: int, name: str, leaf: int | None) -> bool:
    stats = None if leaf is None else pf.metadata.row_group(group).column(leaf).statistics
    if stats is not None and stats.has_null_count:
        return bool(stats.null_count)
    # No statistics (or a nested column): the column chunk itself says.
    column = pf.read_row_group(group, columns=[name]).column(0)
    return bool(column.null_count)


__all__ = ["CHECKS", "CheckedFile", "check_file", "schema_problem"]
