"""Object URIs in :mod:`dpone.sourcepaths`: the matcher that confines a replay to the
manifest's own store, bucket and key glob, and the literal prefix a listing starts at."""

from __future__ import annotations

import pytest

from dpone.sourcepaths import glob_root, kind, matches, normalize, source_path_problem

PATTERN = "s3://landing/orders/*.csv"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("s3://landing/orders/a.csv", True),
        ("s3://landing/orders/.a.csv", False),  # a wildcard skips dot names, as glob does
        ("s3://landing/orders/sub/a.csv", False),  # '*' stays in its segment
        ("s3://landing/orders/../secrets/a.csv", False),
        ("s3://landing/orders//a.csv", False),
        ("s3://landing-2/orders/a.csv", False),  # another bucket
        ("s3://landin/g/orders/a.csv", False),
        ("gs://landing/orders/a.csv", False),  # another store
        ("az://landing/orders/a.csv", False),
        ("landing/orders/a.csv", False),  # a local file
        ("/landing/orders/a.csv", False),
    ],
)
def test_a_uri_matches_only_within_its_store_bucket_and_glob(path: str, expected: bool) -> None:
    assert matches(PATTERN, path) is expected


def test_double_star_spans_key_segments_but_not_dot_folders() -> None:
    pattern = "gs://bucket/in/**/*.jsonl"
    assert matches(pattern, "gs://bucket/in/a.jsonl")
    assert matches(pattern, "gs://bucket/in/x/y/a.jsonl")
    assert not matches(pattern, "gs://bucket/in/.cache/a.jsonl")
    assert not matches(pattern, "gs://bucket/out/a.jsonl")


@pytest.mark.parametrize(
    ("pattern", "root", "below"),
    [
        ("s3://b1b/orders/2026/*.csv", "b1b/orders/2026", ["*.csv"]),
        ("s3://b1b/orders/*/x.csv", "b1b/orders", ["*", "x.csv"]),
        ("s3://b1b/*.csv", "b1b", ["*.csv"]),
        ("s3://b1b/orders/a.csv", "b1b/orders", ["a.csv"]),
        ("az://ctr/**/*.csv", "ctr", ["**", "*.csv"]),
    ],
)
def test_a_listing_starts_at_the_literal_prefix(pattern: str, root: str, below: list[str]) -> None:
    assert glob_root(pattern) == (root, below)


def test_uris_are_kept_as_written() -> None:
    assert kind("s3://b1b/a.csv") == "object"
    assert normalize("s3://b1b/a.csv") == "s3://b1b/a.csv"
    assert source_path_problem("s3://b1b/a*.csv", glob=False) is None
    assert source_path_problem("s3://b1b/a/./b.csv", glob=False) is not None
