"""The state store: one checksummed ``dpone.state.v1`` file per pipeline, replaced atomically.

State changes only inside :meth:`StateStore.commit`, which the lifecycle enters after the
sink committed (dlt's ``pipeline.managed_state`` is the model): leaving the block normally
writes the next revision; an exception inside it writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from dpone import signing
from dpone.canonical import verify_checksum, with_checksum
from dpone.durable import replace_atomic
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
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, pipeline: str) -> Path:
        return self.directory / f"{pipeline}.json"

    def read(self, pipeline: str) -> PipelineState:
        """The committed state, or revision 0 if the pipeline never committed."""
        path = self.path(pipeline)
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return PipelineState(pipeline=pipeline)
        if len(raw) > MAX_STATE_BYTES:
            raise StateError(
                f"the state file of '{pipeline}' is larger than the limit",
                fixes=("restore it from a backup, or delete it to start over (a full reload)",),
            )
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise StateError(
                f"the state file of '{pipeline}' is not JSON",
                fixes=("restore it from a backup, or delete it to start over (a full reload)",),
            ) from None
        if not isinstance(doc, dict) or not verify_checksum(doc):
            raise StateChecksumMismatch(
                f"the state file of '{pipeline}' does not match its checksum",
                fixes=("it was edited or corrupted; restore it, or delete it to reload fully",),
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
                fixes=("restore it from a backup, or delete it to start over (a full reload)",),
            )
        return PipelineState.from_json(doc)

    def write(
        self, state: PipelineState, *, before_publish: Callable[[], None] | None = None
    ) -> None:
        doc = signing.sign(with_checksum(state.to_json()))
        replace_atomic(
            self.path(state.pipeline),
            orjson.dumps(doc, option=orjson.OPT_INDENT_2),
            before_publish=before_publish,
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
        for pattern in (f".{name}.tmp-*", f".{name}.*.tmp"):
            for temp in self.directory.glob(pattern):
                temp.unlink(missing_ok=True)
