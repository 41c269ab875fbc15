"""Replay of quarantined rows: the immutable plan, and the verified read of a run (SPEC §8).

Size (over 500 lines): the plan's document (its fields, the check of an untrusted plan file)
and the two ways it is built from a run (the checked byte path over pinned segments, the
per-record documents otherwise) share the plan's format; the executor is its own module.

:func:`plan` reads a *closed* run's records, verifying each, and builds a bounded
``dpone.dlq-replay-plan.v1``: the records sorted by id with their checksums and refs, the
pinned resolver and target identities (``unbound`` when nobody said which), a ``plan_id``
(the checksum of the plan body, which holds no timestamp, so the same run and identities give
the same id every time) and one idempotency key per item, derived from the plan id, the
record id and the record checksum, usable as a sink load id.

:func:`read_run` is the read an execution starts from: the run's acknowledgements, then every
record, giving the plan again and the records still to replay. The executor that applies a
plan is :mod:`dpone.ops.replay_executor`; the replay errors are here, for both.
"""

from __future__ import annotations

import gc
import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from dpone import signing
from dpone.canonical import CHECKSUM_PATTERN, CHECKSUM_PREFIX
from dpone.clock import format_timestamp
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import PIPELINE_PATTERN, DlqIndex
from dpone.dlq.model import TIMESTAMP_PATTERN, DlqRecord
from dpone.dlq.policy import MAX_RECORDS_PER_RUN
from dpone.dlq.segments import segment_documents
from dpone.errors import EXIT_CONFIG, EXIT_REPLAY_EXECUTOR_REQUIRED, DponeError, Stage
from dpone.ids import is_identifier, is_ulid

if TYPE_CHECKING:
    from dpone.contracts.reasons import ReasonCode
    from dpone.dlq.acks import ReplayAck
    from dpone.dlq.store import DlqStore

PLAN_SCHEMA = "dpone.dlq-replay-plan.v1"
#: The identity of a plan printed without an executor: it can be read, never executed.
UNBOUND = "unbound"
IDENTITY_MAX = 512
KEY_PREFIX = "replay-"
KEY_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
#: A plan holds at most this many items unless asked otherwise (the default run bound).
DEFAULT_MAX_ITEMS = MAX_RECORDS_PER_RUN[0]
HARD_MAX_ITEMS = MAX_RECORDS_PER_RUN[2]


_KEY = re.compile(KEY_PATTERN)
_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_IDENTITY = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")
_PIPELINE = re.compile(PIPELINE_PATTERN)
_SORTED = orjson.OPT_SORT_KEYS


# --- errors -------------------------------------------------------------------------------------


class ReplayError(DponeError):
    """Root of the replay failures; all of them stop before a row is applied."""

    code = "DPONE_DLQ_REPLAY_ERROR"
    stage: Stage = "replay"


class ReplayRunAborted(ReplayError):
    code = "DPONE_DLQ_REPLAY_RUN_ABORTED"


class ReplayRunOpen(ReplayError):
    code = "DPONE_DLQ_REPLAY_RUN_OPEN"


class ReplayExecutorRequired(ReplayError):
    code = "DPONE_DLQ_REPLAY_EXECUTOR_REQUIRED"
    exit_code = EXIT_REPLAY_EXECUTOR_REQUIRED


class ReplayPlanMismatch(ReplayError):
    """The plan is not the plan the store, the resolver and the sink give now."""

    code = "DPONE_DLQ_REPLAY_PLAN_MISMATCH"


class ReplayPlanInvalid(ReplayError):
    code = "DPONE_DLQ_REPLAY_PLAN_INVALID"
    exit_code = EXIT_CONFIG


class ReplayPlanTooLarge(ReplayError):
    code = "DPONE_DLQ_REPLAY_PLAN_TOO_LARGE"


class ReplaySourceChanged(ReplayError):
    """A source file is not the file the record was read from (its SHA-256 differs)."""

    code = "DPONE_DLQ_REPLAY_SOURCE_CHANGED"


class ReplayUnsupported(ReplayError):
    code = "DPONE_DLQ_REPLAY_UNSUPPORTED"
    exit_code = EXIT_CONFIG


class ReplayLoadNotCommitted(ReplayError):
    """The run that quarantined the rows never committed its own load."""

    code = "DPONE_DLQ_REPLAY_LOAD_NOT_COMMITTED"


class RowStillRejected(ReplayError):
    """Why a resolver keeps one record's row out: it stays pending."""

    code = "DPONE_DLQ_REPLAY_ROW_REJECTED"

    def __init__(
        self, reason: ReasonCode, column: str | None = None, *, rule_id: str | None = None
    ) -> None:
        where = f" (column {column})" if column else ""
        rule = f" (assertion {rule_id})" if rule_id else ""
        super().__init__(f"the row is still rejected: {reason.value}{where}{rule}")
        self.reason = reason
        self.column_name = column
        self.rule_id = rule_id


# --- the plan -----------------------------------------------------------------------------------


def idempotency_key(plan_id: str, record_id: str, record_sha256: str) -> str:
    """The key one item is applied with: ``replay-`` and 64 hex digits (a valid load id)."""
    digest = hashlib.sha256(f"{plan_id}\n{record_id}\n{record_sha256}".encode()).hexdigest()
    return KEY_PREFIX + digest


def _keys(plan_id: str) -> Callable[[str, str], str]:
    """:func:`idempotency_key` for many items of one plan: the plan id is hashed once."""
    start = hashlib.sha256(f"{plan_id}\n".encode())

    def key(record_id: str, record_sha256: str) -> str:
        digest = start.copy()
        digest.update(f"{record_id}\n{record_sha256}".encode())
        return KEY_PREFIX + digest.hexdigest()

    return key


class ReplayItem(NamedTuple):
    """One record of a plan (immutable; a named tuple, since a plan holds up to a million)."""

    record_id: str
    record_sha256: str
    record_ref: str
    replayable: bool
    reason_code: str
    idempotency_key: str

    def body(self) -> dict[str, Any]:
        """The hashed part (the key is derived from the plan id, so it cannot be in it)."""
        return {
            "record_id": self.record_id,
            "record_sha256": self.record_sha256,
            "record_ref": self.record_ref,
            "replayable": self.replayable,
            "reason_code": self.reason_code,
        }

    def to_json(self) -> dict[str, Any]:
        return self.body() | {"idempotency_key": self.idempotency_key}


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """A bounded, immutable replay plan of one closed run (``dpone.dlq-replay-plan.v1``)."""

    run_id: str
    load_id: str
    pipeline: str | None
    index_fingerprint: str
    resolver_identity: str
    target_identity: str
    items: tuple[ReplayItem, ...]
    max_items: int
    plan_id: str
    created_at: str

    @property
    def bound(self) -> bool:
        """Whether both identities are pinned (an unbound plan is for reading only)."""
        return UNBOUND not in (self.resolver_identity, self.target_identity)

    def body(self) -> dict[str, Any]:
        """What ``plan_id`` is the checksum of: no timestamp, no key, no bound."""
        return plan_body(
            self.run_id,
            self.load_id,
            self.pipeline,
            self.index_fingerprint,
            self.resolver_identity,
            self.target_identity,
            [item.body() for item in self.items],
        )

    def to_json(self) -> dict[str, Any]:
        body = self.body()
        doc = {
            "schema": PLAN_SCHEMA,
            "plan_id": self.plan_id,
            "run": body["run"],
            "resolver_identity": self.resolver_identity,
            "target_identity": self.target_identity,
            "max_items": self.max_items,
            "item_count": len(self.items),
            "replayable_count": sum(1 for item in self.items if item.replayable),
            "items": [item.to_json() for item in self.items],
            "created_at": self.created_at,
        }
        # Signed when a key is configured: `--execute --plan` refuses an unsigned plan then.
        return signing.sign(doc)

    def problems(self) -> list[str]:
        """Why this plan does not check itself (empty when it does)."""
        found = []
        if self.plan_id != body_checksum(self.body()):
            found.append("its plan_id is not the checksum of its body (the plan was changed)")
        keyed = _keys(self.plan_id)
        for item in self.items:
            if item.idempotency_key != keyed(item.record_id, item.record_sha256):
                found.append(f"the idempotency key of record {item.record_id} was changed")
                break
        if len(self.items) > self.max_items:
            found.append("it holds more items than its max_items")
        return found

    @classmethod
    def from_json(cls, doc: Any) -> ReplayPlan:  # noqa: C901 (a flat check per field of an untrusted document)
        """Check ``doc``'s shape (not its consistency: :meth:`problems` does that)."""
        keys = {
            "schema",
            "plan_id",
            "run",
            "resolver_identity",
            "target_identity",
            "max_items",
            "item_count",
            "replayable_count",
            "items",
            "created_at",
        }
        if (
            not isinstance(doc, dict)
            or set(doc) - {signing.MEMBER} != keys
            or doc["schema"] != PLAN_SCHEMA
        ):
            raise _invalid("/")
        run = doc["run"]
        run_keys = {"run_id", "load_id", "pipeline", "index_fingerprint", "record_count"}
        if not isinstance(run, dict) or set(run) != run_keys:
            raise _invalid("/run")
        if not is_identifier(run["run_id"]) or not is_identifier(run["load_id"]):
            raise _invalid("/run")
        pipeline = run["pipeline"]
        if pipeline is not None and (type(pipeline) is not str or not _PIPELINE.match(pipeline)):
            raise _invalid("/run/pipeline")
        for key, value in (
            ("plan_id", doc["plan_id"]),
            ("run/index_fingerprint", run["index_fingerprint"]),
        ):
            if type(value) is not str or not _CHECKSUM.match(value):
                raise _invalid(f"/{key}")
        for key in ("resolver_identity", "target_identity"):
            if not is_valid_identity(doc[key]):
                raise _invalid(f"/{key}")
        max_items = doc["max_items"]
        if type(max_items) is not int or not 1 <= max_items <= HARD_MAX_ITEMS:
            raise _invalid("/max_items")
        if type(doc["created_at"]) is not str or not _TIMESTAMP.match(doc["created_at"]):
            raise _invalid("/created_at")
        if not isinstance(doc["items"], list):
            raise _invalid("/items")
        items = tuple(_item_from_json(item, i) for i, item in enumerate(doc["items"]))
        ids = [item.record_id for item in items]
        if ids != sorted(set(ids)):
            raise _invalid("/items")
        if doc["item_count"] != len(items) or run["record_count"] != len(items):
            raise _invalid("/item_count")
        if doc["replayable_count"] != sum(1 for item in items if item.replayable):
            raise _invalid("/replayable_count")
        return cls(
            run_id=run["run_id"],
            load_id=run["load_id"],
            pipeline=run["pipeline"],
            index_fingerprint=run["index_fingerprint"],
            resolver_identity=doc["resolver_identity"],
            target_identity=doc["target_identity"],
            items=items,
            max_items=max_items,
            plan_id=doc["plan_id"],
            created_at=doc["created_at"],
        )


def plan_body(
    run_id: str,
    load_id: str,
    pipeline: str | None,
    index_fingerprint: str,
    resolver_identity: str,
    target_identity: str,
    items: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "schema": PLAN_SCHEMA,
        "run": {
            "run_id": run_id,
            "load_id": load_id,
            "pipeline": pipeline,
            "index_fingerprint": index_fingerprint,
            "record_count": len(items),
        },
        "resolver_identity": resolver_identity,
        "target_identity": target_identity,
        "items": items,
    }


def body_checksum(body: dict[str, Any]) -> str:
    """``dpone.canonical.checksum`` of a plan body, without its generic domain check.

    A body holds fixed ASCII keys, strings, booleans and one small integer, which is exactly
    where orjson with sorted keys writes the RFC 8785 bytes (see ``dpone.canonical``);
    skipping the per-value check saves a walk over every item (a test compares the two).
    """
    return CHECKSUM_PREFIX + hashlib.sha256(orjson.dumps(body, option=_SORTED)).hexdigest()


def is_valid_identity(value: Any) -> bool:
    """1..512 printable ASCII characters, no surrounding space."""
    return type(value) is str and len(value) <= IDENTITY_MAX and bool(_IDENTITY.match(value))


def _invalid(pointer: str) -> ReplayPlanInvalid:
    return ReplayPlanInvalid(
        f"the replay plan is not a valid {PLAN_SCHEMA} document at {pointer}",
        fixes=("print the plan again with `dpone ops quarantine-replay ... --format json`",),
    )


def _item_from_json(doc: Any, position: int) -> ReplayItem:
    pointer = f"/items/{position}"
    keys = {
        "record_id",
        "record_sha256",
        "record_ref",
        "replayable",
        "reason_code",
        "idempotency_key",
    }
    if not isinstance(doc, dict) or set(doc) != keys:
        raise _invalid(pointer)
    if not is_ulid(doc["record_id"]):
        raise _invalid(pointer + "/record_id")
    if type(doc["record_sha256"]) is not str or not _CHECKSUM.match(doc["record_sha256"]):
        raise _invalid(pointer + "/record_sha256")
    if type(doc["record_ref"]) is not str or not doc["record_ref"].startswith("dpone://"):
        raise _invalid(pointer + "/record_ref")
    if type(doc["replayable"]) is not bool or type(doc["reason_code"]) is not str:
        raise _invalid(pointer)
    if type(doc["idempotency_key"]) is not str or not _KEY.match(doc["idempotency_key"]):
        raise _invalid(pointer + "/idempotency_key")
    return ReplayItem(
        doc["record_id"],
        doc["record_sha256"],
        doc["record_ref"],
        doc["replayable"],
        doc["reason_code"],
        doc["idempotency_key"],
    )


def load_plan(path: Path, *, require_signature: bool = False) -> ReplayPlan:
    """A plan written earlier (``--plan FILE``), checked against its published schema and its
    keyed signature (``require_signature``: an unsigned plan is refused)."""
    from dpone.published import schema_errors

    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ReplayPlanInvalid(
            f"cannot read the replay plan {path.name} ({type(exc).__name__})"
        ) from None
    except orjson.JSONDecodeError:
        raise ReplayPlanInvalid(f"the replay plan {path.name} is not JSON") from None
    errors = schema_errors(doc, PLAN_SCHEMA)
    if errors:
        raise ReplayPlanInvalid(f"the replay plan {path.name} breaks its schema: {errors[0]}")
    found = signing.problem(
        doc, signing.keyring(), require=require_signature, what=f"the replay plan {path.name}"
    )
    if found is not None:
        code, message = found
        raise ReplayPlanInvalid(
            f"{message} ({code}); nothing was applied",
            code="DPONE_DLQ_REPLAY_PLAN_SIGNATURE_INVALID",
            path=path.name,
            fixes=(
                f"print the plan again with the signing key set (`--format json > {path.name}`)",
                *signing.FIXES[code],
                "or pass --allow-unsigned (anyone who can write the plan can forge it)",
            ),
        )
    return ReplayPlan.from_json(doc)


# --- building -----------------------------------------------------------------------------------


def replayable_index(store: DlqStore, run_id: str) -> DlqIndex:
    """The verified index of a run that may be replayed: closed, not open nor aborted."""
    index = store.read_index(run_id)
    if index.status == "aborted":
        raise ReplayRunAborted(
            f"run {run_id} is aborted ({index.status_reason}); its rows were never committed "
            "as quarantined and are read again by the pipeline's next run",
            fixes=("nothing to replay: rerun the pipeline (with the fixed contract)",),
        )
    if index.status == "open":
        raise ReplayRunOpen(
            f"run {run_id} is still open: its writer is running, or died and was not recovered",
            fixes=(
                "wait for the run to end, or run `dpone ops dlq verify --repair` "
                "(which closes a dead run as aborted)",
            ),
        )
    return index


#: What a plan needs of one record: id, checksum, ref, replayable, reason code.
_Row = tuple[str, str, str, bool, str]


def _collect(
    store: DlqStore,
    run_id: str,
    max_items: int,
    keep: Callable[[str, bool], bool] | None = None,
    index: DlqIndex | None = None,
) -> tuple[DlqIndex, list[_Row], dict[str, DlqRecord]]:
    """The run's index, every record's plan fields (from the segments whose bytes the index
    pins, each record the one the index lists: :meth:`DlqStore.pinned_segments`), and, as
    :class:`DlqRecord` objects checked against the record contract, the records
    ``keep(record_id, replayable)`` asks for.

    Only small tuples outlive the loop: holding 100,000 record objects costs a second of
    garbage collection on its own.
    """
    check_identifier(run_id, "run id")
    if not 1 <= max_items <= HARD_MAX_ITEMS:
        raise ReplayPlanTooLarge(f"max_items must be within 1..{HARD_MAX_ITEMS}")
    if index is None or index.run_id != run_id:
        index = replayable_index(store, run_id)
    if index.record_count > max_items:
        raise ReplayPlanTooLarge(
            f"run {run_id} holds {index.record_count} records; a plan holds at most {max_items}",
            fixes=(f"raise --max-items (up to {HARD_MAX_ITEMS})",),
        )
    rows: list[_Row] = []
    kept: dict[str, DlqRecord] = {}
    ids = index.record_ids
    checksums: dict[str, str] | None = None
    for seg, where, data in store.pinned_segments(run_id, index):
        lo, hi = bisect_left(ids, seg.first_record_id), bisect_right(ids, seg.last_record_id)
        found = _plan_columns(data, run_id) if hi - lo == seg.record_count else None
        if (
            found is not None
            and found.ids == ids[lo:hi]
            and found.shas == index.record_checksums[lo:hi]
            and found.codes == index.codes[lo:hi]
        ):
            fields = list(
                zip(found.ids, found.shas, found.refs, found.flags, found.codes, strict=True)
            )
            if keep is not None:
                for at, (record_id, _, _, replayable, _) in enumerate(fields):
                    if keep(record_id, replayable):
                        record = DlqRecord.from_json(orjson.loads(found.lines[at]))
                        kept[record_id] = record
                        fields[at] = _row_of(record)
            rows.extend(fields)
            continue
        # Not in the form dpone writes, or not what the index lists: record by record.
        if checksums is None:
            checksums = index.checksums()
        for doc in segment_documents(data, where, checksums):
            rows.append(_doc_row(doc, keep, kept))
    rows.sort()
    return index, rows, kept


def _row_of(record: DlqRecord) -> _Row:
    return (
        record.record_id,
        record.sha256,
        record.record_ref,
        record.replay.replayable,
        record.reason.code.value,
    )


def _doc_row(
    doc: dict[str, Any], keep: Callable[[str, bool], bool] | None, kept: dict[str, DlqRecord]
) -> _Row:
    """The plan fields of one record document (its record contract checked when needed)."""
    record_id, replay, ref = doc["record_id"], doc.get("replay"), doc.get("record_ref")
    replayable = replay.get("replayable") is True if isinstance(replay, dict) else False
    reason = doc.get("reason")
    code = reason.get("code") if isinstance(reason, dict) else None
    if keep is not None and keep(record_id, replayable):
        record = DlqRecord.from_json(doc)
        kept[record_id] = record
        return _row_of(record)
    if not isinstance(ref, str) or not isinstance(code, str):
        return _row_of(DlqRecord.from_json(doc))  # raises DPONE_DLQ_RECORD_INVALID if wrong
    return (record_id, doc["sha256"], ref, replayable, code)


@dataclass(frozen=True, slots=True)
class _PlanColumns:
    """The plan fields of a segment's records, line by line (see :func:`_plan_columns`)."""

    lines: list[bytes]
    ids: tuple[str, ...]
    shas: tuple[str, ...]
    refs: list[str]
    flags: list[bool]
    codes: tuple[str, ...]


_SCHEMA_SHA = b',"schema":"dpone.dlq.v1","sha256":"'
_SHA_END = len("sha256:") + 64 + len('"}')
_REPLAYABLE = b',"replay":{"replayable":true,"status":"pending"}'
_NOT_REPLAYABLE = b',"replay":{"replayable":false,"status":"not_replayable"}'
_REF_KEY = b',"record_ref":"'
_ID_KEY = b',"record_id":"'
_ID_MEMBER = len(_ID_KEY) + 26 + 1
_CODE_KEY = b'"code":"'


def _plan_columns(data: bytes, run_id: str) -> _PlanColumns | None:
    """The plan fields of every line of a segment's bytes in the form dpone writes, found
    where canonical JSON puts them; ``None`` when a line is in another form.

    The members after ``reason`` are, in key order: ``record_id`` (26 characters),
    ``record_ref``, ``replay`` (one of two objects), ``run_id``, ``schema`` and ``sha256``;
    they are read from the end of the line, so no value before them (a preserved payload)
    is ever looked at. ``code`` is the last one before ``record_id`` (inside ``reason``). A
    JSON string holds no bare quote, so a ref without a backslash is its own JSON text. The
    caller compares the ids, checksums and codes found with the index's own: the segment's
    bytes are the bytes the index pins, so a line read wrong could not match them.
    """
    lines = data.split(b"\n")
    if lines.pop() or not lines:
        return None
    tail = b',"run_id":' + orjson.dumps(run_id) + _SCHEMA_SHA
    width = len(tail) + _SHA_END
    replayable, not_replayable = _REPLAYABLE, _NOT_REPLAYABLE
    wide, narrow = len(not_replayable), len(replayable)
    ids: list[bytes] = []
    shas: list[bytes] = []
    refs: list[bytes] = []
    flags: list[bool] = []
    codes: list[bytes] = []
    for line in lines:
        at = len(line) - width
        if at < wide or not line.startswith(tail, at) or not line.endswith(b'"}'):
            return None
        if line.startswith(replayable, at - narrow):
            end = at - narrow
            flags.append(True)
        elif line.startswith(not_replayable, at - wide):
            end = at - wide
            flags.append(False)
        else:
            return None
        ref = line.rfind(_REF_KEY, 0, end)
        if (
            ref < _ID_MEMBER
            or not line.startswith(_ID_KEY, ref - _ID_MEMBER)
            or line[ref - 1] != 34  # the quote closing the id
            or line[end - 1] != 34  # the quote closing the ref
        ):
            return None
        code = line.rfind(_CODE_KEY, 0, ref - _ID_MEMBER) + len(_CODE_KEY)
        codes.append(line[code : line.find(b'"', code)])
        refs.append(line[ref + len(_REF_KEY) : end - 1])
        ids.append(line[ref - 27 : ref - 1])
        shas.append(line[-_SHA_END:-2])
    joined = b'"'.join(refs)
    if b"\\" in joined:
        return None  # an escaped character: not its own JSON text
    try:
        texts = [b'"'.join(column).decode() for column in (ids, shas, refs, codes)]
    except UnicodeDecodeError:
        return None
    split = [text.split('"') for text in texts]
    if any(len(column) != len(lines) for column in split):
        return None
    return _PlanColumns(lines, tuple(split[0]), tuple(split[1]), split[2], flags, tuple(split[3]))


def _assemble(
    index: DlqIndex,
    rows: list[_Row],
    resolver_identity: str,
    target_identity: str,
    max_items: int,
    created_at: str,
) -> ReplayPlan:
    for name, identity in (("resolver", resolver_identity), ("target", target_identity)):
        if not is_valid_identity(identity):
            raise ReplayPlanInvalid(f"the {name} identity is not 1..512 printable characters")
    bodies = [
        {
            "record_id": record_id,
            "record_sha256": sha256,
            "record_ref": ref,
            "replayable": replayable,
            "reason_code": code,
        }
        for record_id, sha256, ref, replayable, code in rows
    ]
    plan_id = body_checksum(
        plan_body(
            index.run_id,
            index.load_id,
            index.pipeline,
            index.fingerprint,
            resolver_identity,
            target_identity,
            bodies,
        )
    )
    keyed = _keys(plan_id)
    items = tuple(
        ReplayItem(record_id, sha256, ref, replayable, code, keyed(record_id, sha256))
        for record_id, sha256, ref, replayable, code in rows
    )
    return ReplayPlan(
        run_id=index.run_id,
        load_id=index.load_id,
        pipeline=index.pipeline,
        index_fingerprint=index.fingerprint,
        resolver_identity=resolver_identity,
        target_identity=target_identity,
        items=items,
        max_items=max_items,
        plan_id=plan_id,
        created_at=created_at,
    )


def plan(
    store: DlqStore,
    run_id: str,
    resolver_identity: str = UNBOUND,
    target_identity: str = UNBOUND,
    *,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> ReplayPlan:
    """The replay plan of closed run ``run_id``; every record is read and verified."""
    with _gc_paused():
        index, rows, _ = _collect(store, run_id, max_items)
        return _assemble(
            index,
            rows,
            resolver_identity,
            target_identity,
            max_items,
            format_timestamp(store.now()),
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a plan is built: its 100,000 items and records are
    all alive until the end, so every collection of the growing heap would be wasted work
    (about a third of the planning time of 100,000 records)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class RunRead:
    """One verified read of a run for an execution: its index, every record's plan fields,
    its acknowledgements and the replayable records not acknowledged yet."""

    index: DlqIndex
    max_items: int
    rows: list[_Row]
    acks: Mapping[str, ReplayAck]
    pending: Mapping[str, DlqRecord]

    def plan(self, resolver_identity: str, target_identity: str, created_at: str) -> ReplayPlan:
        """The plan of the run as read (identical to :func:`plan` of the same store)."""
        return _assemble(
            self.index, self.rows, resolver_identity, target_identity, self.max_items, created_at
        )


def read_run(
    store: DlqStore,
    run_id: str,
    max_items: int = DEFAULT_MAX_ITEMS,
    *,
    index: DlqIndex | None = None,
) -> RunRead:
    """Read a closed run's acknowledgements, then every record (verified), for an execution;
    ``index`` is the run's index from :func:`replayable_index` when the caller has it."""
    acks = store.read_acks(run_id)
    with _gc_paused():
        index, rows, records = _collect(
            store,
            run_id,
            max_items,
            keep=lambda record_id, replayable: replayable and record_id not in acks,
            index=index,
        )
    return RunRead(index, max_items, rows, acks, records)


__all__ = [
    "DEFAULT_MAX_ITEMS",
    "PLAN_SCHEMA",
    "UNBOUND",
    "ReplayError",
    "ReplayExecutorRequired",
    "ReplayItem",
    "ReplayLoadNotCommitted",
    "ReplayPlan",
    "ReplayPlanInvalid",
    "ReplayPlanMismatch",
    "ReplayPlanTooLarge",
    "ReplayRunAborted",
    "ReplayRunOpen",
    "ReplaySourceChanged",
    "ReplayUnsupported",
    "RowStillRejected",
    "RunRead",
    "idempotency_key",
    "load_plan",
    "plan",
    "read_run",
    "replayable_index",
]
