"""Regenerate data/readings.parquet: 50 readings from 5 sensors, one every 15 minutes.

Run from anywhere: ``python manifests_examples/sensors_parquet/make_data.py``. Deterministic,
so the committed file only changes when this script does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# sensor id -> base temperature in °C
SENSORS = {
    "greenhouse_a": 18.0,
    "greenhouse_b": 19.5,
    "cold_room": 3.0,
    "loading_bay": 6.5,
    "roof": -2.0,
}
START = datetime(2026, 1, 5, 6, 0, tzinfo=UTC)


def readings() -> pa.Table:
    rows = []
    for step in range(10):
        for n, (sensor, base) in enumerate(SENSORS.items()):
            rows.append(
                {
                    "sensor_id": sensor,
                    "reading_at": START + timedelta(minutes=15 * step, seconds=n),
                    # A smooth, made-up curve per sensor: enough variety for a demo.
                    "temperature_c": round(base + 0.35 * step - 0.1 * (step % 3), 2),
                    "battery": 100 - 2 * n - step // 2,
                }
            )
    schema = pa.schema(
        [
            pa.field("sensor_id", pa.string(), nullable=False),
            pa.field("reading_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("temperature_c", pa.float64()),
            pa.field("battery", pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data" / "readings.parquet"
    pq.write_table(readings(), out, compression="zstd")
    print(f"wrote {out}")
