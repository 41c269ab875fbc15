"""The column naming rule (``dpone/contracts/names.py``): renames, empty names, case collisions,
and the header-looks-like-data guard, including the headers it must not refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpone.contracts.names import Renamed, fold, header_problem, name_columns, value_like


def test_names_are_kept_exactly_as_written() -> None:
    names = ["id", "Unit Price", "Größe", "P95", "select", 'a"b']
    naming = name_columns(names, {})
    assert naming.names == tuple(names)
    assert naming.renamed == ()
    assert naming.collisions == ()


def test_an_empty_name_becomes_its_position() -> None:
    naming = name_columns(["x", "", "y", ""], {})
    assert naming.names == ("x", "column_2", "y", "column_4")
    assert naming.renamed == (
        Renamed(2, "", "column_2", "empty"),
        Renamed(4, "", "column_4", "empty"),
    )


def test_a_contract_source_renames_before_the_empty_rule() -> None:
    naming = name_columns(["", "x", "P95", "p95"], {"": "row_name", "P95": "p95_upper"})
    assert naming.names == ("row_name", "x", "p95_upper", "p95")
    assert naming.collisions == ()
    assert [r.why for r in naming.renamed] == ["contract", "contract"]


def test_names_equal_but_for_ascii_case_collide() -> None:
    assert name_columns(["id", "p95", "P95"], {}).collisions == ((2, 3),)
    # DuckDB folds A-Z only: these are two names on every sink.
    assert name_columns(["É", "é", "ß", "SS"], {}).collisions == ()


def test_a_rename_onto_a_name_the_source_has_collides() -> None:
    assert name_columns(["", "row_name"], {"": "row_name"}).collisions == ((1, 2),)
    assert name_columns(["", "column_1"], {}).collisions == ((1, 2),)


def test_an_exact_duplicate_is_left_to_the_contract_engine() -> None:
    assert name_columns(["a", "a"], {}).collisions == ()


@given(st.lists(st.text(max_size=6), max_size=8))
def test_the_rule_leaves_names_a_sink_can_hold_or_says_why(names: list[str]) -> None:
    naming = name_columns(names, {})
    assert len(naming.names) == len(names)
    assert all(naming.names)
    if not naming.collisions:
        spellings: dict[str, set[str]] = {}
        for name in naming.names:
            spellings.setdefault(fold(name), set()).add(name)
        assert all(len(group) == 1 for group in spellings.values())


@pytest.mark.parametrize(
    "name",
    [
        "1",
        "-2.5",
        "1e6",
        "2020-01-01",
        "31/12/2020",
        "10:30",
        "2020-01-01T10:00:00Z",
        "2020-01-01 10:00:00+02:00",
        "a@b.co",
    ],
)
def test_values_are_recognized(name: str) -> None:
    assert value_like(name)


@pytest.mark.parametrize(
    ("header", "first"),
    [
        (
            ["id", "name", "amount", "updated_at", "active"],
            ["1", "ann", "10.00", "2026-01-01", "t"],
        ),
        (["id", "p95", "P95"], ["1", "2", "3"]),
        (["customer_email", "sku", "qty"], ["a@b.co", "AB-12", "3"]),
        (["q1_2024", "region"], ["5", "north"]),
        (["name", "city"], ["alice", "rome"]),
        (["q1", "q2"], ["a1", "b2"]),
        (["", "x", "y"], ["1", "10", "a"]),
    ],
)
def test_ordinary_headers_pass(header: list[str], first: list[str]) -> None:
    assert header_problem(header, first, frozenset()) is None


@pytest.mark.parametrize(
    ("header", "first"),
    [
        (["1987", "2020-01-01", "a@b.c"], ["2", "2020-01-02", "d@e.f"]),
        (["AB-12", "CD-34", "name"], ["XY-56", "ZZ-78", "other"]),
        (["7"], None),
    ],
)
def test_a_data_row_as_header_is_refused_without_its_names(
    header: list[str], first: list[str] | None
) -> None:
    problem = header_problem(header, first, frozenset())
    assert problem is not None
    for name in header:
        if name != "name":
            assert name not in problem


def test_declared_names_are_never_data() -> None:
    assert header_problem(["country", "2024"], ["de", "5"], frozenset({"2024"})) is None
