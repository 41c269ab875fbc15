"""Read the next chunk while the current one is enforced and staged.

A file source spends its time in pyarrow's CSV/JSON/Parquet readers and in hashing the file,
all of which release the GIL; enforcement and staging are mostly Arrow kernels and DuckDB,
which release it too. Reading one chunk ahead on a thread of its own lets the two overlap
(on two cores, most of the reading disappears from the wall time). Memory stays bounded:
at most ``depth`` chunks wait in the queue and one more is being read. A process that may
run on one core only (``taskset``, a container's cpuset) reads inline: nothing would overlap.

Order, errors and the end of the stream are kept: chunks come out in the order the source
made them, and an exception the source raised comes out of ``next()`` where the chunk would
have, after every chunk before it. :meth:`ReadAhead.close` stops the reader after its current
chunk and closes the source's iterator on the reader's own thread (the one that opened its
files or connections).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Generic, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    from dpone.connectors.base import Source, SourceChunk
    from dpone.manifest.plan import Plan

T = TypeVar("T")

_Message = tuple[Literal["item", "error", "end"], object]


class ReadAhead(Generic[T]):
    """Iterate ``make()`` on a background thread, up to ``depth`` items ahead."""

    def __init__(
        self,
        make: Callable[[], Iterator[T]],
        *,
        depth: int = 1,
        stop: Callable[[], None] | None = None,
    ) -> None:
        """``stop``: called by :meth:`close` first, to cut short what the reader may be
        waiting for (a file source's hashing, :meth:`FileSource.stop_reading`)."""
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._stop_source = stop
        self._queue: queue.Queue[_Message] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(
            target=self._produce, args=(make,), name="dpone-read-ahead", daemon=True
        )
        self._thread.start()

    def _produce(self, make: Callable[[], Iterator[T]]) -> None:
        try:
            items = make()
            try:
                for item in items:
                    self._queue.put(("item", item))
                    if self._stop.is_set():
                        return
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # handed to the consumer, raised there
            self._queue.put(("error", exc))
            return
        self._queue.put(("end", None))

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "item":
            return value  # type: ignore[return-value]
        self._finished = True
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop reading ahead and wait for the reader to let go of the source."""
        self._stop.set()
        if self._stop_source is not None and not self._finished:
            self._stop_source()
        self._finished = True
        while self._thread.is_alive():
            # The reader may be blocked on a full queue: make room until it sees the stop.
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Inline(Generic[T]):
    """The same interface without a thread: the source's iterator, closed on exit."""

    def __init__(self, items: Iterator[T]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[T]:
        return self._items

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Inline[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS reports one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


def early_chunks(plan: Plan, source: Source) -> ReadAhead[SourceChunk] | None:
    """The source's chunks, read on a thread from now on (None: not for this run).

    A run of a file source (``engine: local``) on more than one core reads its first chunk
    while the run does what comes before its first chunk (imports, the sink, recovery, the
    state, the journal), which otherwise leaves the other core idle. Only where what is read
    cannot depend on those steps: a source that reads ahead (pure reading, nothing bound to
    a thread) and takes no cursor from the state.
    """
    from dpone.connectors.base import reads_ahead

    if (
        plan.runtime.engine != "local"
        or getattr(plan.source.spec, "prevalidated", False)
        or source.cursor_pushdown
        or not reads_ahead(source)
        or usable_cores() < 2
    ):
        return None

    def make() -> Iterator[SourceChunk]:
        return source.chunks(plan.runtime.chunk_size, after=None)

    # A run that ends before its stream does not wait for a large file's whole hash.
    stop = getattr(source, "stop_reading", None)
    return ReadAhead(make, depth=1, stop=stop)


class EarlyRead(NamedTuple):
    """A run's source, built from its plan, and its chunks already being read."""

    source: Source
    chunks: ReadAhead[SourceChunk]


def read_early(plan: Plan, env: Mapping[str, str]) -> EarlyRead | None:
    """Local files' chunks read from right after the compile (None: not for this run).

    Called before the run imports its runtime (DuckDB, the DLQ, the sinks: some 0.07 s, all
    of it holding the GIL) and wires, recovers and journals, so that the pyarrow reading and
    the file's hash, which release the GIL, use the other core meanwhile. What is read is held
    in memory only (:func:`early_chunks`, which also decides whether this run reads early);
    the run reads it after its preflight, lock, recovery and journal entry, as it reads any
    chunk, and a run that stops before its stream closes the reader, which stops the hashing
    and drops what was read. Only local files (an object store's files need its secrets and
    the network); a source this cannot build is built again, and its error raised, where the
    run wires its connectors.
    """
    from dpone.manifest.specs import FileSourceSpec

    spec = plan.source.spec
    if not isinstance(spec, FileSourceSpec) or spec.storage is not None or usable_cores() < 2:
        return None
    from dpone.connectors.sources import make_source

    try:
        source = make_source(spec, env=env, read_all_as_text=True)
    except Exception:  # raised again, in its place, by the run's wiring
        return None
    chunks = early_chunks(plan, source)
    return None if chunks is None else EarlyRead(source, chunks)


__all__ = ["EarlyRead", "Inline", "ReadAhead", "early_chunks", "read_early", "usable_cores"]
