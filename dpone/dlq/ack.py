"""The replay acknowledgement ``dpone.dlq-replay-ack.v1`` (SPEC §8).

``acks/<run_id>/<record_id>.json`` is written create-only, after the replay sink succeeded,
and never changes: a retry that finds a matching acknowledgement skips the record. It pins
the record it acknowledges by checksum, the plan, the idempotency key and both identities.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal, get_args

from dpone.canonical import CHECKSUM_PATTERN, checksum
from dpone.dlq.errors import DlqAckInvalid
from dpone.dlq.model import TIMESTAMP_PATTERN
from dpone.ids import is_identifier, is_ulid

ACK_SCHEMA = "dpone.dlq-replay-ack.v1"
AckOutcome = Literal["applied", "still_rejected"]
ACK_OUTCOMES: tuple[str, ...] = get_args(AckOutcome)
KEY_PATTERN = r"^[A-Za-z0-9._:+/=-]{1,256}$"
IDENTITY_MAX = 512

ACK_KEYS = frozenset(
    {
        "schema",
        "run_id",
        "record_id",
        "record_sha256",
        "plan_id",
        "idempotency_key",
        "outcome",
        "resolver_identity",
        "target_identity",
        "acknowledged_at",
        "sha256",
    }
)

_KEY = re.compile(KEY_PATTERN)
_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)


@dataclass(frozen=True, slots=True)
class ReplayAck:
    """One acknowledged replay of one record. ``sha256`` is filled in by :meth:`sealed`."""

    run_id: str
    record_id: str
    record_sha256: str
    plan_id: str
    idempotency_key: str
    outcome: AckOutcome
    resolver_identity: str
    target_identity: str
    acknowledged_at: str
    sha256: str = ""

    def body(self) -> dict[str, Any]:
        """The document without its checksum member."""
        return {
            "schema": ACK_SCHEMA,
            "run_id": self.run_id,
            "record_id": self.record_id,
            "record_sha256": self.record_sha256,
            "plan_id": self.plan_id,
            "idempotency_key": self.idempotency_key,
            "outcome": self.outcome,
            "resolver_identity": self.resolver_identity,
            "target_identity": self.target_identity,
            "acknowledged_at": self.acknowledged_at,
        }

    def sealed(self) -> ReplayAck:
        """This acknowledgement with its checksum computed."""
        return replace(self, sha256=checksum(self.body()))

    def to_json(self) -> dict[str, Any]:
        doc = self.body()
        doc["sha256"] = self.sha256 or checksum(doc)
        return doc

    @classmethod
    def from_json(cls, doc: Any, *, require_checksum: bool = True) -> ReplayAck:  # noqa: C901 (a flat check per field of an untrusted document)
        """Check ``doc`` against the acknowledgement contract (not its checksum)."""
        if not isinstance(doc, Mapping):
            raise _invalid("/")
        keys = set(doc)
        if not require_checksum:
            keys.add("sha256")
        if keys != ACK_KEYS or doc["schema"] != ACK_SCHEMA:
            raise _invalid("/")
        if type(doc["run_id"]) is not str or not _identifier_ok(doc["run_id"]):
            raise _invalid("/run_id")
        if not is_ulid(doc["record_id"]):
            raise _invalid("/record_id")
        for key in ("record_sha256", *(("sha256",) if "sha256" in doc else ())):
            if type(doc[key]) is not str or not _CHECKSUM.match(doc[key]):
                raise _invalid(f"/{key}")
        if type(doc["plan_id"]) is not str or not _key_ok(doc["plan_id"]):
            raise _invalid("/plan_id")
        if type(doc["idempotency_key"]) is not str or not _KEY.match(doc["idempotency_key"]):
            raise _invalid("/idempotency_key")
        if doc["outcome"] not in ACK_OUTCOMES:
            raise _invalid("/outcome")
        for key in ("resolver_identity", "target_identity"):
            value = doc[key]
            if type(value) is not str or not 0 < len(value) <= IDENTITY_MAX:
                raise _invalid(f"/{key}")
        if type(doc["acknowledged_at"]) is not str or not _TIMESTAMP.match(doc["acknowledged_at"]):
            raise _invalid("/acknowledged_at")
        return cls(
            run_id=doc["run_id"],
            record_id=doc["record_id"],
            record_sha256=doc["record_sha256"],
            plan_id=doc["plan_id"],
            idempotency_key=doc["idempotency_key"],
            outcome=doc["outcome"],
            resolver_identity=doc["resolver_identity"],
            target_identity=doc["target_identity"],
            acknowledged_at=doc["acknowledged_at"],
            sha256=doc.get("sha256", ""),
        )


# The run, the plan and the identities repeat on every line of a replay's acknowledgements:
# their checks are cached (the other fields differ per line).
@lru_cache(maxsize=256)
def _identifier_ok(value: str) -> bool:
    return is_identifier(value)


@lru_cache(maxsize=256)
def _key_ok(value: str) -> bool:
    return _KEY.match(value) is not None


def _invalid(pointer: str) -> DlqAckInvalid:
    return DlqAckInvalid(
        f"the acknowledgement is not a valid dpone.dlq-replay-ack.v1 document at {pointer}"
    )


__all__ = ["ACK_OUTCOMES", "ACK_SCHEMA", "AckOutcome", "ReplayAck"]
