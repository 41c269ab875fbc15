"""Filesystem sink: Parquet files under ``<root>/<dataset>/<table>/``.

The marker protocol (stage, prepare, commit, recover) stays here as one state machine over one
folder layout; the file helpers it calls are in ``fsfiles.py``, the marker documents in
``fsmarkers.py``.

A file system has no transactions, so the marker file is the commit point:

1. ``write`` streams batches into ``<root>/_dpone_staging/<load_id>/part-NNNNN.parquet``.
2. ``commit`` prepares everything in staging (merge: de-duplicated staged rows and rewrites
   of the live files that hold a staged key), fsyncs it, then creates
   ``<root>/_dpone_loads/<load_id>.json`` atomically (temp file, fsync, ``link``). The marker
   lists every file the load adds (staging path -> final path) and removes.
3. Only then are files moved (``os.replace``) and removed, and the staging folder deleted.

A crash before step 2 leaves staging without a marker: rolled back. A crash after it leaves a
marker whose staging folder still exists: :meth:`FilesystemSink.recover` (run by ``begin``,
``commit`` and ``cleanup_abandoned``) finishes the moves, which are idempotent. Readers read
the files :meth:`FilesystemSink.committed_files` lists, or the table folder once recovered.

A load that carries idempotency keys (a replay batch) lists them under ``keys`` in its
marker, so they are committed by the same ``link`` as its files.

The sink folder is the user's (it may be a link, followed). The folders the sink keeps below
it (``_dpone_staging/``, its load folders, ``_dpone_loads/``, ``<dataset>/<table>/``) are
reached without following links (:func:`dpone.durable.open_below`): a link there is refused
(``DPONE_PATH_IS_SYMLINK``), and staging is removed through a folder descriptor, so nothing
is ever deleted or written through one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dpone import durable, signing
from dpone.canonical import with_checksum
from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import (
    ID_PATTERN,
    ColumnDefinition,
    LoadMarker,
    LoadSpec,
    TableDefinition,
)
from dpone.connectors.batches import position_mask
from dpone.connectors.errors import SinkConfigError, SinkError, SinkSchemaError
from dpone.connectors.sinks._common import PROBE_POSITION, os_error, positioned, widen_parquet
from dpone.connectors.sinks.fsfiles import (
    create_json,
    dedup,
    file_schema,
    parquet_writer,
    read_schema,
    read_table,
    rewrite_without,
    rmtree,
    with_load_columns,
    write_json,
)
from dpone.connectors.sinks.fsmarkers import (
    LOADS,
    MARKER_SCHEMA,
    STAGING,
    TOKEN_FILE,
    is_identifier,
    read_marker,
    read_token,
    require_signed,
    token_doc,
)
from dpone.connectors.sinks.loadstate import LoadState, keys_committed_twice
from dpone.connectors.sql.merge import is_dpone_column
from dpone.errors import DponeError
from dpone.manifest.specs import FilesystemSinkSpec


class FilesystemSink:
    """Parquet files of ``dataset/table`` under the directory ``root``."""

    def __init__(
        self,
        spec: FilesystemSinkSpec,
        *,
        clock: Clock = utc_now,
        max_rows_per_file: int = 1_000_000,
    ) -> None:
        root, dataset, table = spec.path, spec.dataset, spec.table
        for part in (dataset, table):
            if not ID_PATTERN.fullmatch(part) or part.startswith((".", "_dpone")):
                raise SinkConfigError("filesystem dataset and table must be plain folder names")
        self.root = Path(root)
        self.dataset = dataset
        self.table = table
        self.target = f"{dataset}.{table}"
        self.identity = f"filesystem:{spec.display}:{self.target}"
        self.table_dir = self.root / dataset / table
        self._clock = clock
        self.max_rows_per_file = max_rows_per_file
        # Markers are create-only: a parsed, checked one is reused while its file is unchanged.
        self._markers: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}

    # --- paths and markers ------------------------------------------------------------------------

    def staging_dir(self, load_id: str) -> Path:
        return self.root / STAGING / load_id

    def marker_path(self, load_id: str) -> Path:
        return self.root / LOADS / f"{load_id}.json"

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _owned(self, path: Path) -> None:
        """Refuse a link (or a file) where the sink keeps a folder of its own."""
        durable.check_below(self.root, path)

    def _marker_docs(self) -> list[dict[str, Any]]:
        """Every marker document in this root, in commit order."""
        folder = self.root / LOADS
        # Each time, before a marker is acted on: a link planted during a run is refused too.
        for owned in (folder, self.root / STAGING, self.table_dir):
            self._owned(owned)
        if not folder.is_dir():
            return []
        docs = [self._read_marker(path) for path in folder.glob("*.json")]
        return sorted(docs, key=lambda d: (int(d["seq"]), d["load_id"]))

    def _marker_doc(self, load_id: str) -> dict[str, Any] | None:
        if not is_identifier(load_id):
            return None
        path = self.marker_path(load_id)
        return self._read_marker(path) if os.path.lexists(path) else None

    def _read_marker(self, path: Path) -> dict[str, Any]:
        try:
            st = os.lstat(path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            cached = self._markers.get(path.name)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            doc = read_marker(path, self.root)
        except OSError as exc:
            raise os_error(exc, "filesystem sink: reading a load marker") from None
        self._markers[path.name] = (stamp, doc)
        return doc

    # --- Sink -------------------------------------------------------------------------------------

    def committed_load(self, load_id: str) -> LoadMarker | None:
        doc = self._marker_doc(load_id)
        if doc is None:
            return None
        require_signed(doc, f"{LOADS}/{doc['load_id']}.json")  # recovery acts on it
        return LoadMarker.from_json(doc)

    def session(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to pin: a file system has no connection."""
        return contextlib.nullcontext()

    def committed_keys(self, keys: Collection[str]) -> set[str]:
        wanted = set(keys)
        if not wanted:
            return set()
        found: set[str] = set()
        for doc in self._marker_docs():
            found.update(key for key in doc.get("keys", ()) if key in wanted)
        return found

    def existing_keys(self, columns: Sequence[str], probe: pa.Table) -> pa.BooleanArray:
        names = list(columns)
        probe = positioned(probe.select(names))
        hits: set[int] = set()
        for path in self.committed_files():
            schema = read_schema(path)
            if any(schema.get_field_index(name) < 0 for name in names):
                continue  # the file predates the column: none of its rows holds a key
            wanted = pa.schema([*(schema.field(n) for n in names), probe.schema.field(-1)])
            try:
                typed = probe.cast(wanted)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise SinkSchemaError(
                    "a key column does not cast to the type an existing file holds"
                ) from None
            held = read_table(path, names)
            matched = typed.join(held, keys=names, join_type="left semi")
            hits.update(matched.column(PROBE_POSITION).to_pylist())
        return position_mask(sorted(hits), probe.num_rows)

    def committed_files(self) -> list[Path]:
        """The table's live files, replayed from the committed markers (adds minus removes)."""
        live: dict[str, None] = {}
        for doc in self._marker_docs():
            if doc["target"] != self.target:
                continue
            for rel in doc["removes"]:
                live.pop(rel, None)
            for _, final in doc["adds"]:
                live[final] = None
        return [self.root / rel for rel in sorted(live)]

    def existing_schema(self) -> pa.Schema | None:
        schemas = [read_schema(path) for path in self.committed_files() if path.is_file()]
        if schemas:
            unified = pa.unify_schemas(schemas)
            # The sink's own columns (``_dpone_load_id``) are never a load's.
            return pa.schema([f for f in unified if not is_dpone_column(f.name)])
        mine = [d for d in self._marker_docs() if d["target"] == self.target]
        if not mine:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(mine[-1]["arrow_schema"])))

    def begin(self, load: LoadSpec) -> FilesystemLoad:
        if load.merge_strategy != "upsert" or load.deleted_column is not None:
            # The compiler refuses these first (DPONE_MANIFEST_SINK_OPTION).
            raise SinkConfigError(
                "the filesystem sink merges by rewriting files on unique_key (upsert) only: "
                "no delete-insert, scd2 or deleted_column",
                fixes=("use sink type duckdb or postgres for these strategies",),
            )
        self.recover_all()  # refuses links where the sink keeps its folders (_marker_docs)
        return FilesystemLoad(self, load)

    def recover(self, load_id: str) -> str:
        """Finish a commit whose marker exists, or roll back staging without one.

        Returns ``completed``, ``rolled_back`` or ``nothing``.
        """
        staging = self.staging_dir(load_id)
        self._owned(staging.parent)
        if staging.is_symlink() or not staging.is_dir():
            return "nothing"
        doc = self._marker_doc(load_id)
        if doc is not None:
            token = staging / TOKEN_FILE
            info = read_token(token) if os.path.lexists(token) else {}
            if info.get("token") == doc["staging_token"]:
                # Completing moves and deletes table files: only for documents dpone signed.
                require_signed(doc, f"{LOADS}/{doc['load_id']}.json")
                require_signed(info, f"the staging token of {STAGING}/{doc['load_id']}")
                self._apply(doc)
            rmtree(staging)
            return "completed"
        rmtree(staging)
        return "rolled_back"

    def recover_all(self) -> list[str]:
        """Complete every pending commit of this root (any pipeline); returns their load ids."""
        done = []
        for doc in self._marker_docs():
            if self.staging_dir(doc["load_id"]).is_dir():
                self.recover(doc["load_id"])
                done.append(str(doc["load_id"]))
        return done

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        """Complete pending commits, then drop ``pipeline``'s staging that has no marker."""
        self.recover_all()
        removed: list[str] = []
        folder = self.root / STAGING
        self._owned(folder)
        for staging in sorted(folder.iterdir()) if folder.is_dir() else ():
            if staging.name == keep_load_id:
                continue
            if staging.is_symlink() or not staging.is_dir():
                continue  # dpone only creates folders here; anything else is not its staging
            info_path = staging / TOKEN_FILE
            try:
                owner = read_token(info_path).get("pipeline") if info_path.is_file() else None
            except (OSError, SinkError):
                owner = None
            # A folder without a readable _load.json died inside begin(): nobody owns it.
            if owner is not None and owner != pipeline:
                continue
            if self.recover(staging.name) == "rolled_back":
                removed.append(staging.name)
        return removed

    # --- commit machinery -------------------------------------------------------------------------

    def _apply(self, doc: dict[str, Any]) -> None:
        """Move the added files in and delete the removed ones; idempotent."""
        touched: set[Path] = set()
        try:
            for staged_rel, final_rel in doc["adds"]:
                src, dst = self.root / staged_rel, self.root / final_rel
                if src.is_file():
                    durable.make_below(self.root, dst.parent)  # no link on the way
                    os.replace(src, dst)
                    touched.add(dst.parent)
                elif not dst.is_file():
                    raise SinkError(
                        f"load {doc['load_id']}: a committed file is missing",
                        code="DPONE_SINK_RECOVERY_FAILED",
                    )
            for rel in doc["removes"]:
                path = self.root / rel
                self._owned(path.parent)
                path.unlink(missing_ok=True)
                touched.add(path.parent)
            for folder in touched:
                durable.fsync_dir(folder, missing_ok=True)
        except OSError as exc:
            raise os_error(exc, "filesystem sink: applying a commit") from None


class FilesystemLoad(LoadState):
    """Staged Parquet files of one load."""

    def __init__(self, sink: FilesystemSink, spec: LoadSpec) -> None:
        super().__init__(spec)
        self._sink = sink
        self._staging = sink.staging_dir(spec.load_id)
        self._token = uuid.uuid4().hex
        self._writer: pq.ParquetWriter | None = None
        self._parts: list[Path] = []
        self._rows_in_part = 0
        # A load id that already committed stages nothing; commit() returns its marker.
        self._noop = sink.marker_path(spec.load_id).exists()
        if self._noop:
            return
        try:
            rmtree(self._staging)
            durable.make_below(sink.root, self._staging)
            write_json(
                self._staging / TOKEN_FILE,
                signing.sign(
                    with_checksum(token_doc(spec.load_id, spec.pipeline, sink.target, self._token))
                ),
                anchor=sink.root,
            )
        except OSError as exc:
            raise os_error(exc, "filesystem sink: creating staging") from None

    def _stage(self, batch: pa.RecordBatch) -> None:
        if self._noop:
            return
        try:
            if self._writer is None or self._rows_in_part >= self._sink.max_rows_per_file:
                self._close_writer()
                part = self._staging / f"part-{len(self._parts):05d}.parquet"
                self._writer = parquet_writer(part, file_schema(self.spec))
                self._parts.append(part)
                self._rows_in_part = 0
            self._writer.write_batch(with_load_columns(self.spec, batch))
            self._rows_in_part += batch.num_rows
        except OSError as exc:
            raise os_error(exc, "filesystem sink: staging rows") from None

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        """Every staged part rewritten to the wider schema: a load's parts share one."""
        if self._noop:
            return
        try:
            self._close_writer()
            for part in self._parts:
                widen_parquet(part, file_schema(spec))
        except OSError as exc:
            raise os_error(exc, "filesystem sink: adding columns to staged rows") from None

    def _commit(self) -> LoadMarker:
        sink, spec = self._sink, self.spec
        existing = sink._marker_doc(spec.load_id)
        if existing is not None:
            if not self._noop:
                rmtree(self._staging)
            return LoadMarker.from_json(existing)
        if self._noop:  # the marker seen at begin() vanished: refuse to commit nothing
            raise SinkError(
                f"load {spec.load_id}: its marker disappeared during the load",
                code="DPONE_SINK_RECOVERY_FAILED",
            )
        try:
            self._close_writer()
            sink.recover_all()
            adds, removes = self._plan()
            for staged, _ in adds:
                durable.fsync_file(sink.root / staged)
            durable.fsync_dir(self._staging, missing_ok=True)
            doc: dict[str, Any] = {
                "schema": MARKER_SCHEMA,
                **self.new_marker(sink.target, iso_utc(sink._clock())).to_json(),
                "seq": 1 + max((int(d["seq"]) for d in sink._marker_docs()), default=0),
                "staging_token": self._token,
                "arrow_schema": base64.b64encode(spec.schema.serialize().to_pybytes()).decode(),
                "adds": adds,
                "removes": removes,
            }
            if spec.keys:
                if sink.committed_keys(spec.keys):
                    raise keys_committed_twice(spec.load_id)
                doc["keys"] = list(spec.keys)
            doc = signing.sign(with_checksum(doc))
            created = create_json(sink.marker_path(spec.load_id), doc, anchor=sink.root)
        except OSError as exc:
            raise os_error(exc, "filesystem sink: committing the load") from None
        if not created:  # a concurrent commit of the same load id won
            rmtree(self._staging)
            return LoadMarker.from_json(sink._read_marker(sink.marker_path(spec.load_id)))
        sink.recover(spec.load_id)
        return LoadMarker.from_json(doc)

    def target_definition(self) -> TableDefinition:
        """The table as :meth:`FilesystemSink.existing_schema` reads it once this load has
        committed: the schema of its Parquet files, unified. ``replace`` leaves only this
        load's files; ``append`` and ``merge`` keep the live files (a merge rewrites some,
        in their own schema) and add this load's. Types are Arrow's names of the columns."""
        self._require_open()
        schema = file_schema(self.spec)
        existing = None if self.spec.mode == "replace" else self._sink.existing_schema()
        if existing is not None:
            try:
                schema = pa.unify_schemas([existing, schema])
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                # Files of different types for one column: each file keeps its own, and the
                # column is named with this load's type.
                extra = [f for f in schema if existing.get_field_index(f.name) < 0]
                schema = pa.schema(
                    [schema.field(f.name) if f.name in schema.names else f for f in existing]
                    + extra
                )
        return TableDefinition(
            self._sink.target,
            "parquet",
            tuple(ColumnDefinition(f.name, str(f.type), f.nullable) for f in schema),
        )

    def _plan(self) -> tuple[list[list[str]], list[str]]:
        """(adds as [staging, final] pairs, removes) relative to the root."""
        sink, spec = self._sink, self.spec
        staged = list(self._parts)
        removes: list[str] = []
        rewrites: list[Path] = []
        sink._owned(sink.table_dir)
        live = sorted(p for p in sink.table_dir.glob("*.parquet") if p.is_file())
        if spec.mode == "replace":
            removes = [sink._rel(p) for p in live]
        elif spec.mode == "merge" and staged:
            staged, keys = dedup(staged, spec.unique_key, self._staging, file_schema(spec))
            for i, path in enumerate(live):
                out = self._staging / f"rewrite-{i:05d}.parquet"
                kept = rewrite_without(path, keys, spec.unique_key, out)
                if kept is None:
                    continue
                removes.append(sink._rel(path))
                if kept:
                    rewrites.append(out)
        adds = [
            [sink._rel(p), sink._rel(sink.table_dir / f"{spec.load_id}-{i:05d}.parquet")]
            for i, p in enumerate(staged)
        ]
        adds += [
            [sink._rel(p), sink._rel(sink.table_dir / f"{spec.load_id}-r{i:05d}.parquet")]
            for i, p in enumerate(rewrites)
        ]
        return adds, removes

    def _abort(self) -> None:
        try:
            self._close_writer()
        finally:
            if not self._noop:
                # A marker means the commit point passed: finish it instead of undoing it.
                # If that fails too, the next begin/commit/cleanup_abandoned finishes it.
                with contextlib.suppress(OSError, DponeError):
                    self._sink.recover(self.spec.load_id)

    def _close(self) -> None:
        self._close_writer()
