"""Everything the store writes validates against its published schema; vocabularies match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone.contracts.dlq import PII_POLICIES, RETENTION_DAYS
from dpone.contracts.reasons import REASONS, ReasonCode
from dpone.dlq.acks import ACK_OUTCOMES
from dpone.dlq.index import RUN_STATUSES, STATUS_REASONS
from dpone.dlq.model import REPLAY_STATUSES
from dpone.dlq.store import DlqStore
from dpone.published import load_schema, schema_errors, schema_names
from tests.support.dlqfiles import lines_of, segment_files
from tests.support.dlqrows import StoreFactory, files_under, rows, run_writer

SCHEMAS = ("dpone.dlq.v1", "dpone.dlq-index.v1", "dpone.dlq-replay-ack.v1")


def _doc(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _docs(path: Path) -> list[Any]:
    """The documents of a file: one, or one per line of a JSON-lines segment."""
    if path.suffix == ".jsonl":
        return [orjson.loads(line) for line in lines_of(path)]
    return [_doc(path)]


def _schema_of(path: Path) -> str:
    if path.name == "index.json":
        return "dpone.dlq-index.v1"
    return "dpone.dlq-replay-ack.v1" if path.parts[-3] == "acks" else "dpone.dlq.v1"


def test_schemas_are_published() -> None:
    assert set(SCHEMAS) <= set(schema_names())
    for name in SCHEMAS:
        schema = load_schema(name)
        assert schema["$id"] == f"https://dpone.dev/schemas/{name}.schema.json"
        assert schema["additionalProperties"] is False
        assert all("description" in prop for prop in schema["properties"].values())


@pytest.mark.parametrize("policy", ["reference_only", "masked", "preserve"])
def test_everything_written_validates(make_store: StoreFactory, root: Path, policy: str) -> None:
    store = make_store(pii_policy=policy)
    values = [{"a": 1, "b": [1.5, None], "c": {"d": "x"}}] * 3
    with store.open_run("closed", "load-1", pipeline="orders") as writer:
        ids = writer.write_chunk(rows(3, values=values))
        writer.write_chunk(rows(2, start=4, column=None, reason=ReasonCode.DECODE_FAILED))
    open_writer = store.open_run("open", "load-1", pipeline="orders")
    open_writer.write_chunk(rows(2))

    def failing_run() -> None:
        with store.open_run("aborted", "load-1") as writer:
            writer.write_chunk(rows(1, values=values[:1]))
            raise RuntimeError("the sink failed")

    with pytest.raises(RuntimeError):
        failing_run()
    record = store.read_record("closed", ids[0])
    for outcome in ACK_OUTCOMES:
        store.write_ack(
            "closed",
            ids[ACK_OUTCOMES.index(outcome)],
            {
                "plan_id": "sha256:" + "0" * 64,
                "idempotency_key": f"{record.record_id}:1",
                "outcome": outcome,
                "resolver_identity": "file:data/orders.csv",
                "target_identity": "duckdb:analytics.orders",
                "record_sha256": store.read_record(
                    "closed", ids[ACK_OUTCOMES.index(outcome)]
                ).sha256,
            },
        )
    seen: dict[str, int] = {}
    for path in files_under(root):
        if path.name == "writer.lock":
            continue
        name = _schema_of(path)
        for number, doc in enumerate(_docs(path), start=1):
            assert schema_errors(doc, name) == [], (path, number)
            seen[name] = seen.get(name, 0) + 1
    # Every record of the three runs and every acknowledgement, one document each.
    assert seen == {
        "dpone.dlq.v1": 5 + 2 + 1,
        "dpone.dlq-index.v1": 3,
        "dpone.dlq-replay-ack.v1": len(ACK_OUTCOMES),
    }
    open_writer.close()
    assert schema_errors(_doc(root / "runs" / "open" / "index.json"), "dpone.dlq-index.v1") == []


def test_recovered_and_rebuilt_indexes_validate(make_store: StoreFactory, root: Path) -> None:
    run_writer(root, run_id="run-1", chunks=[3], mode="abandon")
    store: DlqStore = make_store()
    store.recover_abandoned()
    assert schema_errors(_doc(root / "runs" / "run-1" / "index.json"), "dpone.dlq-index.v1") == []


def test_schema_rejects_what_the_model_rejects(store: DlqStore, root: Path) -> None:
    with store.open_run("run-1", "load-1") as writer:
        [record_id] = writer.write_chunk(rows(1))
    [doc] = _docs(segment_files(root, "run-1")[0])
    assert doc["record_id"] == record_id
    assert schema_errors(doc, "dpone.dlq.v1") == []
    assert schema_errors({**doc, "extra": 1}, "dpone.dlq.v1")
    assert schema_errors(
        {**doc, "reason": {**doc["reason"], "message": "value 42 is bad"}}, "dpone.dlq.v1"
    )
    assert schema_errors(
        {**doc, "payload": {"policy": "reference_only", "value": {"a": 1}}}, "dpone.dlq.v1"
    )
    assert schema_errors({**doc, "payload": {"policy": "masked", "value": ["x"]}}, "dpone.dlq.v1")


def _enum(schema: dict[str, Any], *path: str) -> list[Any]:
    node: Any = schema
    for key in path:
        node = node[key]
    return list(node["enum"])


def test_vocabularies_match_the_code() -> None:
    record = load_schema("dpone.dlq.v1")
    index = load_schema("dpone.dlq-index.v1")
    ack = load_schema("dpone.dlq-replay-ack.v1")
    codes = [c.value for c in ReasonCode]
    reason = record["properties"]["reason"]
    assert _enum(reason, "properties", "code") == codes
    assert set(_enum(reason, "properties", "category")) == {c.category for c in ReasonCode}
    for rule in reason["allOf"]:
        code = ReasonCode(rule["if"]["properties"]["code"]["const"])
        then = rule["then"]["properties"]
        assert then["message"]["const"] == REASONS[code].message
        assert then["stage"]["const"] == REASONS[code].stage
        assert then["category"]["const"] == code.category
    assert len(reason["allOf"]) == len(ReasonCode)
    assert _enum(record, "properties", "payload", "properties", "policy") == list(PII_POLICIES)
    assert _enum(record, "properties", "replay", "properties", "status") == list(REPLAY_STATUSES)
    assert _enum(index, "properties", "status") == list(RUN_STATUSES)
    assert index["properties"]["status_reason"]["anyOf"][0]["enum"] == list(STATUS_REASONS)
    assert _enum(index, "properties", "pii_policy") == list(PII_POLICIES)
    days = index["properties"]["retention_days"]
    assert (days["minimum"], days["maximum"]) == RETENTION_DAYS[1:]
    assert _enum(ack, "properties", "outcome") == list(ACK_OUTCOMES)
