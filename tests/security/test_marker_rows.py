"""SQL sinks read their load markers back (recovery, committed loads): an edited marker row is
a typed DPONE_SINK_MARKER_INVALID, never an internal error or a trusted value."""

from __future__ import annotations

import pytest

from dpone.connectors.errors import SinkMarkerInvalid
from dpone.connectors.sinks._common import marker_from_row

GOOD = ("load-1", "orders", "run-1", 3, None, "2026-12-03T00:00:00Z", "analytics.orders", "append")


def test_a_marker_row_as_written_reads_back() -> None:
    marker = marker_from_row(GOOD)
    assert (marker.load_id, marker.rows, marker.mode) == ("load-1", 3, "append")


@pytest.mark.parametrize(
    ("position", "value"),
    [
        (0, "../../x"),
        (0, "load-1\n"),
        (1, "orders/../../etc"),
        (2, None),
        (3, "3"),
        (3, -1),
        (4, 7),
        (5, None),
    ],
)
def test_an_edited_marker_row_is_refused_typed(position: int, value: object) -> None:
    row: list[object] = list(GOOD)
    row[position] = value
    with pytest.raises(SinkMarkerInvalid) as caught:
        marker_from_row(row)
    assert caught.value.code == "DPONE_SINK_MARKER_INVALID"
    assert caught.value.fixes
