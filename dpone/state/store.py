"""The state store: one checksummed ``dpone.state.v1`` file per pipeline, replaced atomically.

State changes only inside :meth:`StateStore.commit`, which the lifecycle enters after the
sink committed (dlt's ``pipeline.managed_state`` is the model): leaving the block normally
writes the next revision; an exception inside it writes nothing.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from dpone import durable, signing
from dpone.canonical import verify_checksum, with_checksum
from dpone.errors import DponeError
from dpone.published import schema_errors
from dpone.state.model import PipelineState

#: 100,000 boundary digests (``runtime/window.py``) take about 2.2 MB of base64.
MAX_STATE_BYTES = 16 * 1_048_576


class StateError(DponeError):
    code = "DPONE_STATE_INVALID"
    stage = "state"


class StateChecksumMismatch(StateError):
    code = "DPONE_STATE_CHECKSUM_MISMATCH"


class StateSignatureInvalid(StateError):
    code = "DPONE_STATE_SIGNATURE_INVALID"


class StateConflict(StateError):
    code = "DPONE_STATE_CONFLICT"


def _fixes(pipeline: str) -> tuple[str, ...]:
    """What to do about a state file that does not verify. Deleting it by hand would make the
    next run reload the whole source, which duplicates every row of an append table: the
    reset command refuses exactly that case."""
    return (
        "restore it from a backup",
        f"or forget it: `dpone pipeline reset {pipeline} --work-dir <work_dir>` (allowed for "
        "a merge or replace table; an append table also needs --manifest M --drop-table, "
        "which empties it so the reload loads each row once)",
    )


class StateTransaction:
    """The pending next state; the lifecycle sets it, the store writes it on success."""

    def __init__(self, current: PipelineState) -> None:
        self.current = current
        self.next: PipelineState | None = None
        self.before_publish: Callable[[], None] | None = None

    def set(self, state: PipelineState) -> None:
        if state.pipeline != self.current.pipeline:
            raise StateError("a state transaction cannot change the pipeline name")
        self.next = state


class StateStore:
    def __init__(self, directory: Path, *, anchor: Path | None = None) -> None:
        self.directory = directory
        #: the user's folder above ``state/`` (the work dir): followed; nothing below it is
        #: (a ``state/`` that is a link is refused, see :func:`dpone.durable.open_below`)
        self.anchor = anchor if anchor is not None else directory.parent

    def path(self, pipeline: str) -> Path:
        return self.directory / f"{pipeline}.json"

    def read(self, pipeline: str) -> PipelineState:
        """The committed state, or revision 0 if the pipeline never committed."""
        raw = durable.read_below(self.anchor, self.path(pipeline), MAX_STATE_BYTES)
        if raw is None:
            return PipelineState(pipeline=pipeline)
        if len(raw) > MAX_STATE_BYTES:
            raise StateError(
                f"the state file of '{pipeline}' is larger than the limit",
                fixes=_fixes(pipeline),
            )
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise StateError(
                f"the state file of '{pipeline}' is not JSON",
                fixes=_fixes(pipeline),
            ) from None
        if not isinstance(doc, dict) or not verify_checksum(doc):
            raise StateChecksumMismatch(
                f"the state file of '{pipeline}' does not match its checksum",
                fixes=("it was edited or corrupted", *_fixes(pipeline)),
            )
        signed = signing.problem(doc, signing.keyring(), require=False, what="the state file")
        if signed is not None:
            raise StateSignatureInvalid(
                f"the state file of '{pipeline}': {signed[1]} ({signed[0]})",
                fixes=signing.FIXES[signed[0]],
            )
        problems = schema_errors(doc, "dpone.state.v1")
        if problems or doc["pipeline"] != pipeline:
            raise StateError(
                f"the state file of '{pipeline}' is not a valid dpone.state.v1",
                fixes=_fixes(pipeline),
            )
        return PipelineState.from_json(doc)

    def write(
        self, state: PipelineState, *, before_publish: Callable[[], None] | None = None
    ) -> None:
        doc = signing.sign(with_checksum(state.to_json()))
        durable.replace_atomic(
            self.path(state.pipeline),
            orjson.dumps(doc, option=orjson.OPT_INDENT_2),
            before_publish=before_publish,
            anchor=self.anchor,
        )

    @contextlib.contextmanager
    def commit(self, pipeline: str, *, expected_revision: int) -> Iterator[StateTransaction]:
        """Enter after the sink committed. Writes the transaction's state on normal exit."""
        current = self.read(pipeline)
        if current.revision != expected_revision:
            raise StateConflict(
                f"the state of '{pipeline}' moved from revision {expected_revision} to "
                f"{current.revision} during this run",
                fixes=("another run of this pipeline committed meanwhile; rerun",),
            )
        txn = StateTransaction(current)
        yield txn
        if txn.next is not None:
            self._remove_dead_temps(pipeline)
            self.write(txn.next, before_publish=txn.before_publish)

    def _remove_dead_temps(self, pipeline: str) -> None:
        """Drop temp files of a replace that died before its rename (:mod:`dpone.durable`
        names them ``.<file>.tmp-<pid>-<token>``; dpone 0.1 wrote ``.<file>.<token>.tmp``).
        Commits run under the pipeline lock, so any such file belongs to a dead process, and
        nothing reads it."""
        name = self.path(pipeline).name
        fd = durable.open_below(self.anchor, self.directory, create=False)
        if fd is None:
            return
        try:
            for entry in os.listdir(fd):
                if any(fnmatch.fnmatchcase(entry, p) for p in (f".{name}.tmp-*", f".{name}.*.tmp")):
                    durable.unlink_quietly(fd, entry)
        finally:
            os.close(fd)
