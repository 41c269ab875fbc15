"""A minimal valid manifest to mutate in tests."""

from __future__ import annotations

BASE = """\
name: orders_daily
source:
  type: file
  format: csv
  path: data/*.csv
sink:
  type: duckdb
  dataset: analytics
  table: orders
  strategy: {mode: append}
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {type: integer, nullable: false}
        amount: {type: decimal, precision: 12, scale: 2}
        updated_at: {type: timestamp, timezone: true}
"""
