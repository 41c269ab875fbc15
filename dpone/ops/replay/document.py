"""The replay plan document ``dpone.dlq-replay-plan.v1``: its items, its id, its keys, and
the check of a plan file read back (SPEC §8).

A plan is the records of one closed run sorted by id, with their checksums and refs, the
pinned resolver and target identities (``unbound`` when nobody said which), a ``plan_id``
(the checksum of the plan body, which holds no timestamp, so the same run and identities give
the same id every time) and one idempotency key per item, derived from the plan id, the
record id and the record checksum, usable as a sink load id. Building one from a run is
:mod:`dpone.ops.replay.reading`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from dpone import signing
from dpone.canonical import CHECKSUM_PATTERN, CHECKSUM_PREFIX
from dpone.contracts.dlq import MAX_RECORDS_PER_RUN
from dpone.dlq.index import PIPELINE_PATTERN
from dpone.dlq.model import TIMESTAMP_PATTERN
from dpone.ids import is_identifier, is_ulid
from dpone.ops.plan_files import PlanFileKind, read_plan_file
from dpone.ops.replay.errors import ReplayPlanInvalid
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.manifest.plan import Plan

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


def replay_bound(
    asked: int | None, *, manifest: Plan | None = None, stored: ReplayPlan | None = None
) -> int:
    """How many items a plan may hold: a stored plan's own bound (``--plan FILE``), else
    ``asked`` (``--max-items``), else the manifest's ``dlq.max_records_per_run``, else the
    default run bound."""
    if stored is not None:
        return stored.max_items
    if asked is not None:
        return asked
    if manifest is not None:
        return manifest.sink.dlq.max_records_per_run
    return DEFAULT_MAX_ITEMS


# --- the plan -----------------------------------------------------------------------------------


def idempotency_key(plan_id: str, record_id: str, record_sha256: str) -> str:
    """The key one item is applied with: ``replay-`` and 64 hex digits (a valid load id)."""
    digest = hashlib.sha256(f"{plan_id}\n{record_id}\n{record_sha256}".encode()).hexdigest()
    return KEY_PREFIX + digest


def item_keys(plan_id: str) -> Callable[[str, str], str]:
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


@frozen
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
        keyed = item_keys(self.plan_id)
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


_PLAN_FILE = PlanFileKind(
    what="the replay plan",
    schema=PLAN_SCHEMA,
    error=ReplayPlanInvalid,
    signature_code="DPONE_DLQ_REPLAY_PLAN_SIGNATURE_INVALID",
    untouched="nothing was applied",
    remake="print the plan again with the signing key set (`--format json > {name}`)",
    unsigned_fix="or pass --allow-unsigned (anyone who can write the plan can forge it)",
)


def load_plan(path: Path, *, require_signature: bool = False) -> ReplayPlan:
    """A plan written earlier (``--plan FILE``), checked against its published schema and its
    keyed signature (``require_signature``: an unsigned plan is refused)."""
    return ReplayPlan.from_json(
        read_plan_file(path, _PLAN_FILE, require_signature=require_signature)
    )


__all__ = [
    "DEFAULT_MAX_ITEMS",
    "HARD_MAX_ITEMS",
    "KEY_PATTERN",
    "PLAN_SCHEMA",
    "UNBOUND",
    "ReplayItem",
    "ReplayPlan",
    "body_checksum",
    "idempotency_key",
    "is_valid_identity",
    "item_keys",
    "load_plan",
    "plan_body",
    "replay_bound",
]
