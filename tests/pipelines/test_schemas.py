"""The pipeline documents' vocabularies are their published schemas' enums."""

from __future__ import annotations

from dpone.ops.pipelines import READ_STATUSES
from dpone.published import load_schema


def test_the_read_statuses_are_the_schemas() -> None:
    info = load_schema("dpone.pipeline-info.v1")["properties"]
    listed = load_schema("dpone.pipeline-list.v1")["properties"]["pipelines"]["items"]
    assert info["state"]["properties"]["status"]["enum"] == list(READ_STATUSES)
    assert info["journal"]["properties"]["status"]["enum"] == list(READ_STATUSES)
    assert listed["properties"]["state"]["enum"] == list(READ_STATUSES)
