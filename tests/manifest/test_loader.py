"""The loader: YAML safety, marks, and every load-level error code."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpone.errors import ManifestError
from dpone.manifest.loader import MAX_MANIFEST_BYTES, load_manifest, parse_manifest


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_manifest(text, path=Path("/m/manifest.yaml"), display_path="manifest.yaml")


def codes(text: str) -> list[tuple[str, int | None, int | None]]:
    with pytest.raises(ManifestError) as info:
        parse(text)
    return [(e.code, e.line, e.column) for e in info.value.errors]


def test_marks_point_at_keys_and_values() -> None:
    loaded = parse("name: orders\nsink:\n  table:   t1\n  list: [a, b]\n")
    assert loaded.document == {"name": "orders", "sink": {"table": "t1", "list": ["a", "b"]}}
    mark = loaded.mark("/sink/table")
    assert mark is not None
    assert (mark.key_line, mark.key_column, mark.line, mark.column) == (3, 3, 3, 12)
    item = loaded.mark("/sink/list/1")
    assert item is not None
    assert (item.line, item.column) == (4, 13)


def test_scalars_follow_yaml_1_2_core_and_keep_timestamps_as_text() -> None:
    doc = parse(
        "a: yes\nb: on\nc: 0x1F\nd: -1_000\ne: 1.5e3\nf: ~\ng: 2026-01-01T00:00:00Z\n"
        "h: True\n1_000: key\n"
    ).document
    assert doc == {
        "a": "yes",
        "b": "on",
        "c": 31,
        "d": -1000,
        "e": 1500.0,
        "f": None,
        "g": "2026-01-01T00:00:00Z",
        "h": True,
        "1_000": "key",
    }


def test_pointer_escaping_in_marks() -> None:
    loaded = parse("columns:\n  a/b: 1\n  c~d: 2\n")
    assert loaded.mark("/columns/a~1b") is not None
    assert loaded.mark("/columns/c~0d") is not None


def test_merge_keys_and_aliases_expand() -> None:
    doc = parse("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\nd: *b\n").document
    assert doc["c"] == {"x": 1, "y": 3}
    assert doc["d"] == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1\nb: 2\na: 3\n", [("DPONE_MANIFEST_YAML_DUPLICATE_KEY", 3, 1)]),
        ("a: !foo x\n", [("DPONE_MANIFEST_YAML_TAG", 1, 4)]),
        ("a: !!python/object:os.system x\n", [("DPONE_MANIFEST_YAML_TAG", 1, 4)]),
        ("a: !!binary aGVsbG8=\n", [("DPONE_MANIFEST_YAML_TAG", 1, 4)]),
        ("a: !!set {x}\n", [("DPONE_MANIFEST_YAML_TAG", 1, 4)]),
        ("a: [1, 2\nb: 3\n", [("DPONE_MANIFEST_YAML_SYNTAX", 2, 2)]),
        ("- 1\n- 2\n", [("DPONE_MANIFEST_NOT_MAPPING", 1, 1)]),
        ("just text\n", [("DPONE_MANIFEST_NOT_MAPPING", 1, 1)]),
        ("", [("DPONE_MANIFEST_NOT_MAPPING", None, None)]),
        ("a: 1\n---\nb: 2\n", [("DPONE_MANIFEST_MULTIPLE_DOCUMENTS", 2, 1)]),
        ("a: 99999999999999999999\n", [("DPONE_MANIFEST_RANGE", 1, 4)]),
        ("a: .inf\n", [("DPONE_MANIFEST_TYPE", 1, 4)]),
        ("a: .nan\n", [("DPONE_MANIFEST_TYPE", 1, 4)]),
        ("? [a]\n: 1\n", [("DPONE_MANIFEST_TYPE", 1, 3)]),
        ("a: &a [*a]\n", [("DPONE_MANIFEST_YAML_TOO_DEEP", 1, 4)]),
    ],
)
def test_load_errors(text: str, expected: list[tuple[str, int | None, int | None]]) -> None:
    assert codes(text) == expected


def test_every_duplicate_and_tag_is_reported_at_once() -> None:
    got = codes("a: 1\na: 2\nb: !x 1\nc: {d: 1, d: 2}\n")
    assert got == [
        ("DPONE_MANIFEST_YAML_DUPLICATE_KEY", 2, 1),
        ("DPONE_MANIFEST_YAML_TAG", 3, 4),
        ("DPONE_MANIFEST_YAML_DUPLICATE_KEY", 4, 11),
    ]


def test_alias_bomb_is_refused_quickly() -> None:
    layers = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        layers.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    got = codes("\n".join(layers) + "\n")
    assert got[0][0] == "DPONE_MANIFEST_YAML_ALIAS_LIMIT"


def test_too_many_aliases_are_refused_before_expansion() -> None:
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 1500) + "]\n"
    assert codes(text)[0][0] == "DPONE_MANIFEST_YAML_ALIAS_LIMIT"


def test_deep_nesting_is_refused_from_the_event_stream() -> None:
    assert codes("a: " + "[" * 5000 + "]" * 5000 + "\n")[0][0] == "DPONE_MANIFEST_YAML_TOO_DEEP"
    assert codes("a:" + "".join(f"\n{' ' * i}k{i}:" for i in range(1, 80)) + " 1\n")[0][0] == (
        "DPONE_MANIFEST_YAML_TOO_DEEP"
    )


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as missing:
        load_manifest(tmp_path / "nope.yaml")
    assert missing.value.code == "DPONE_MANIFEST_NOT_FOUND"

    with pytest.raises(ManifestError) as directory:
        load_manifest(tmp_path)
    assert directory.value.code == "DPONE_MANIFEST_NOT_FOUND"

    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: " + b"x" * MAX_MANIFEST_BYTES + b"\n")
    with pytest.raises(ManifestError) as too_large:
        load_manifest(big)
    assert too_large.value.code == "DPONE_MANIFEST_TOO_LARGE"

    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ManifestError) as encoding:
        load_manifest(latin)
    assert encoding.value.code == "DPONE_MANIFEST_ENCODING"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: orders\n")
    assert load_manifest(path).document == {"name": "orders"}
