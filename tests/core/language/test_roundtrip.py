"""Parse → print → parse gives the same algebra, for every example query and the grammar-covering corpus."""

from __future__ import annotations

import pytest

from csparql.core.frontend import compile_query, parse_query
from csparql.core.language.printer import format_query
from support import LANGUAGE_FIXTURES, expected_outcome, read_blocks, spec_query_files

CORPUS = read_blocks(LANGUAGE_FIXTURES / "valid_queries.rq")
EXAMPLES = [p for p in spec_query_files() if expected_outcome(p) == "ok"]


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 150
    assert len({b.name for b in CORPUS}) == len(CORPUS)


def assert_round_trip(text: str, name: str) -> None:
    original = compile_query(text, name)
    printed = format_query(parse_query(text, name))
    again = compile_query(printed, f"{name} (printed)")
    assert again == original, f"the printed query means something else:\n{printed}"
    # printing is stable: the printed form prints as itself
    assert format_query(parse_query(printed)) == printed


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_queries_round_trip(path):
    assert_round_trip(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("block", CORPUS, ids=lambda b: b.name)
def test_corpus_queries_round_trip(block):
    assert_round_trip(block.text, block.name)


def test_round_trip_detects_a_changed_meaning():
    """The comparison is sharp: queries that differ in one term do not compare equal."""
    a = compile_query("SELECT * WHERE { ?s <http://e/p> 1 }")
    b = compile_query("SELECT * WHERE { ?s <http://e/p> 01 }")
    assert a != b
