"""Filesystem sink: Parquet files under ``<root>/<dataset>/<table>/``.

Size (over 500 lines): the marker protocol (stage, prepare, commit, recover) is one state
machine over one folder layout; split, the commit point would be spread over modules.

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
import json
import os
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpone import durable, signing
from dpone.canonical import with_checksum
from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import ID_PATTERN, LoadMarker, LoadSpec
from dpone.connectors.batches import position_mask
from dpone.connectors.errors import SinkConfigError, SinkError, SinkFileCorrupt, SinkSchemaError
from dpone.connectors.sinks._common import PROBE_POSITION, os_error, positioned, widen_parquet
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
from dpone.errors import DponeError
from dpone.manifest.specs import FilesystemSinkSpec

_READ_BATCH = 65_536


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
            schema = _read_schema(path)
            if any(schema.get_field_index(name) < 0 for name in names):
                continue  # the file predates the column: none of its rows holds a key
            wanted = pa.schema([*(schema.field(n) for n in names), probe.schema.field(-1)])
            try:
                typed = probe.cast(wanted)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise SinkSchemaError(
                    "a key column does not cast to the type an existing file holds"
                ) from None
            held = _read_table(path, names)
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
        schemas = [_read_schema(path) for path in self.committed_files() if path.is_file()]
        if schemas:
            return pa.unify_schemas(schemas)
        mine = [d for d in self._marker_docs() if d["target"] == self.target]
        if not mine:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(mine[-1]["arrow_schema"])))

    def begin(self, load: LoadSpec) -> FilesystemLoad:
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
            _rmtree(staging)
            return "completed"
        _rmtree(staging)
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
            _rmtree(self._staging)
            durable.make_below(sink.root, self._staging)
            _write_json(
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
                self._writer = _parquet_writer(part, self.spec.schema)
                self._parts.append(part)
                self._rows_in_part = 0
            self._writer.write_batch(batch)
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
                widen_parquet(part, spec.schema)
        except OSError as exc:
            raise os_error(exc, "filesystem sink: adding columns to staged rows") from None

    def _commit(self) -> LoadMarker:
        sink, spec = self._sink, self.spec
        existing = sink._marker_doc(spec.load_id)
        if existing is not None:
            if not self._noop:
                _rmtree(self._staging)
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
            created = _create_json(sink.marker_path(spec.load_id), doc, anchor=sink.root)
        except OSError as exc:
            raise os_error(exc, "filesystem sink: committing the load") from None
        if not created:  # a concurrent commit of the same load id won
            _rmtree(self._staging)
            return LoadMarker.from_json(sink._read_marker(sink.marker_path(spec.load_id)))
        sink.recover(spec.load_id)
        return LoadMarker.from_json(doc)

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
            staged, keys = _dedup(staged, spec.unique_key, self._staging, spec.schema)
            for i, path in enumerate(live):
                out = self._staging / f"rewrite-{i:05d}.parquet"
                kept = _rewrite_without(path, keys, spec.unique_key, out)
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


# --- merge helpers ---------------------------------------------------------------------------


def _dedup(
    staged: list[Path], keys: tuple[str, ...], folder: Path, schema: pa.Schema
) -> tuple[list[Path], pa.Table]:
    """Keep the last staged row per key; returns the staged files to add and the key table.

    Memory: the staged rows' key columns (not the rows) plus one read batch.
    """
    parts = []
    offset = 0
    for path in staged:
        table = pq.read_table(path, columns=list(keys))
        idx = pa.array(range(offset, offset + table.num_rows), pa.int64())
        parts.append(table.append_column("_dpone_idx", idx))
        offset += table.num_rows
    all_keys = pa.concat_tables(parts)
    winners = all_keys.group_by(list(keys), use_threads=False).aggregate([("_dpone_idx", "max")])
    key_table = winners.select(list(keys))
    if winners.num_rows == all_keys.num_rows:
        return staged, key_table
    keep = winners.column("_dpone_idx_max").combine_chunks()
    out = folder / "merged-00000.parquet"
    offset = 0
    with _parquet_writer(out, schema) as writer:
        for batch in _iter_file(staged):
            idx = pa.array(range(offset, offset + batch.num_rows), pa.int64())
            offset += batch.num_rows
            writer.write_batch(batch.filter(pc.is_in(idx, value_set=keep)))
    return [out], key_table


def _iter_file(paths: list[Path]) -> Iterator[pa.RecordBatch]:
    for path in paths:
        with pq.ParquetFile(str(path)) as pf:
            yield from pf.iter_batches(batch_size=_READ_BATCH)


def _rewrite_without(
    path: Path, key_table: pa.Table, keys: tuple[str, ...], out: Path
) -> int | None:
    """Rewrite ``path`` without the rows whose key is in ``key_table``.

    Returns None when no row matches (the file stays), else the number of rows kept in ``out``.
    """
    file_schema = _read_schema(path)
    try:
        probe = key_table.cast(pa.schema([file_schema.field(k) for k in keys]))
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SinkSchemaError(
            "a merge key column is missing from, or does not cast to, an existing file"
        ) from None
    existing = _read_table(path, list(keys))
    if existing.join(probe, keys=list(keys), join_type="left semi").num_rows == 0:
        return None
    kept = 0
    with _parquet_writer(out, file_schema) as writer:
        for batch in _iter_file([path]):
            rest = pa.Table.from_batches([batch]).join(
                probe, keys=list(keys), join_type="left anti"
            )
            rest = rest.select(file_schema.names).cast(file_schema)
            if rest.num_rows:
                writer.write_table(rest)
                kept += rest.num_rows
    if not kept:
        out.unlink()
    return kept


# --- durable file helpers --------------------------------------------------------------------


def _corrupt(path: Path) -> SinkFileCorrupt:
    name = path.name if is_identifier(path.name) else "a file"
    return SinkFileCorrupt(
        f"filesystem sink: the committed table file {name} is not readable Parquet",
        fixes=(
            "restore the file from a backup (the load marker in _dpone_loads/ lists it), "
            "or reload the table with strategy mode replace",
        ),
    )


def _read_schema(path: Path) -> pa.Schema:
    """A committed file's schema; a damaged file is a typed error, not a library one."""
    schema: pa.Schema = _read_committed(path, lambda: pq.read_schema(path))
    return schema


def _read_table(path: Path, columns: list[str]) -> pa.Table:
    table: pa.Table = _read_committed(path, lambda: pq.read_table(path, columns=columns))
    return table


def _read_committed(path: Path, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except FileNotFoundError:
        raise SinkError(
            "a committed file of the table is missing", code="DPONE_SINK_RECOVERY_FAILED"
        ) from None
    except OSError as exc:
        if exc.errno is None and isinstance(exc, pa.ArrowException):
            raise _corrupt(path) from None  # Arrow's IOError for bytes it cannot decode
        raise os_error(exc, "filesystem sink: reading a table file") from None
    except pa.ArrowException:
        raise _corrupt(path) from None


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, indent=1).encode()


def _write_json(path: Path, doc: dict[str, Any], *, anchor: Path) -> None:
    durable.replace_atomic(path, _json_bytes(doc), anchor=anchor)


def _create_json(path: Path, doc: dict[str, Any], *, anchor: Path) -> bool:
    """Create ``path`` atomically and only if absent; False when it already existed."""
    try:
        durable.create_only(path, _json_bytes(doc), anchor=anchor)
    except FileExistsError:
        return False
    return True


def _parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of a new staging file, created first with dpone's file mode (0640) and never
    through a link (Arrow's own open would give 0644 and follow one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, durable.FILE_MODE)
    os.close(fd)
    return pq.ParquetWriter(str(path), schema)


def _rmtree(path: Path) -> None:
    """Remove a staging folder of the sink (``<root>/_dpone_staging/<load_id>``) through the
    descriptor of ``_dpone_staging`` opened without following links: a link in its place is
    refused, a link at the load folder's name is dropped itself, never followed."""
    durable.remove_tree_below(path.parent.parent, path)
