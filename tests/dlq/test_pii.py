"""The PII canary: a unique string in every column of every rejected row.

Under ``reference_only`` and ``masked`` it reaches no byte of any file under the store, no
log line and no error message; under ``preserve`` (non-production) it is in the payload and
nowhere else.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from dpone.cli.ops_dlq import dlq_group
from dpone.dlq.errors import DlqError, DlqPreserveRefused
from dpone.dlq.model import REDACTED
from dpone.dlq.rejects import to_json_safe
from dpone.dlq.store import DlqStore
from dpone.logs import capture
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import records_on_disk, segment_files
from tests.support.dlqrows import StoreFactory, files_under, rows

CANARY = f"CANARY-{uuid.uuid4().hex}"


def _rows_with_canary(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{CANARY}-id-{n}",
            "amount": f"{CANARY}-amount",
            "customer": {"email": f"{CANARY}@example.com", "tags": [CANARY, f"x{CANARY}"]},
            "note": f"{CANARY}\n\u00e4\U0001f600",
            "raw": CANARY.encode(),
        }
        for n in range(count)
    ]


def _exercise(store: DlqStore, root: Path) -> list[str]:
    """Drive every code path that could leak: writes, retries, errors, reads, CLI."""
    messages: list[str] = []
    values = _rows_with_canary(120)
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    writer.write_chunk(rows(100, values=values[:100]))
    writer.write_chunk(rows(100, values=values[:100]))  # the same rows again: a no-op
    writer.close()
    small = DlqStore(
        root,
        store.policy.__class__(**{**store.policy.to_json(), "max_records_per_run": 5}),
        clock=store.clock,
    )
    failing = small.open_run("run-2", "load-1", pipeline="orders")
    [kept] = failing.write_chunk(rows(1, start=500, values=values[100:101]))
    [tampered] = segment_files(root, "run-2")
    for attempt in (
        lambda: failing.write_chunk(rows(10, values=values[:10])),  # over the limit
        lambda: (
            tampered.write_bytes(tampered.read_bytes()[:-3]) and small.read_record("run-2", kept)
        ),
    ):
        try:
            attempt()
        except DlqError as err:
            messages += [str(err), repr(err), orjson.dumps(err.to_json()).decode()]
    failing.abort()
    list(store.iter_records("run-1"))
    verify_store(store)
    runner = CliRunner()
    for args in (["verify"], ["summary"], ["summary", "--format", "json"]):
        messages.append(runner.invoke(dlq_group, [*args, "--dir", str(root)]).output)
    return messages


@pytest.mark.parametrize("policy", ["reference_only", "masked"])
def test_canary_never_reaches_disk_logs_or_errors(
    make_store: StoreFactory, root: Path, policy: str
) -> None:
    store = make_store(pii_policy=policy)
    with capture() as logs:
        messages = _exercise(store, root)
    assert logs, "the store logs its lifecycle"
    assert CANARY not in repr(logs)
    for message in messages:
        assert CANARY not in message
    assert any("DPONE_DLQ_LIMIT_EXCEEDED" in m for m in messages)
    assert any("DPONE_DLQ_CHECKSUM_MISMATCH" in m for m in messages)
    needle = CANARY.encode()
    files = list(files_under(root))
    # Every byte written is checked: both runs' segments (all 101 records) and indexes.
    assert sorted(str(p.relative_to(root)) for p in files) == [
        "runs/run-1/index.json",
        "runs/run-1/segments/00000001.jsonl",
        "runs/run-2/index.json",
        "runs/run-2/segments/00000001.jsonl",
    ]
    assert len(records_on_disk(root, "run-1")) == 100
    for path in files:
        assert needle not in path.read_bytes(), path
        assert CANARY not in str(path)
    if policy == "masked":
        payload = records_on_disk(root, "run-1")[0]["payload"]
        assert payload == {
            "policy": "masked",
            "value": {
                "id": REDACTED,
                "amount": REDACTED,
                "customer": {"email": REDACTED, "tags": [REDACTED, REDACTED]},
                "note": REDACTED,
                "raw": REDACTED,
            },
        }


def test_preserve_keeps_the_row_in_the_payload_only(make_store: StoreFactory, root: Path) -> None:
    store = make_store(pii_policy="preserve")
    values = _rows_with_canary(20)
    with capture() as logs, store.open_run("run-1", "load-1") as writer:
        ids = writer.write_chunk(rows(20, values=values))
    assert CANARY not in repr(logs)
    docs = {doc["record_id"]: doc for doc in records_on_disk(root, "run-1")}
    assert sorted(docs) == sorted(ids)
    for record_id, value in zip(ids, values, strict=True):
        doc = docs[record_id]
        assert doc["payload"] == {"policy": "preserve", "value": to_json_safe(value)}
        rest = {k: v for k, v in doc.items() if k != "payload"}
        assert CANARY not in orjson.dumps(rest).decode()
    assert CANARY.encode() not in (root / "runs" / "run-1" / "index.json").read_bytes()


@pytest.mark.parametrize("environment", ["production", "prod", "Prod-EU"])
def test_preserve_is_refused_in_production(make_store: StoreFactory, environment: str) -> None:
    with pytest.raises(DlqPreserveRefused) as caught:
        make_store(pii_policy="preserve", environment=environment)
    assert caught.value.exit_code == 2
    make_store(pii_policy="masked", environment=environment)
