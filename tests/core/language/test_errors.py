"""Malformed queries: each gives a short error in plain words, at the right line and column, with a caret."""

from __future__ import annotations

import re

import pytest

from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from support import LANGUAGE_FIXTURES, read_blocks

CASES = read_blocks(LANGUAGE_FIXTURES / "invalid_queries.rq", metadata_keys=("error", "message"))


def test_there_are_at_least_100_malformed_queries():
    assert len(CASES) >= 100
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_malformed_query_is_refused_at_its_place(case):
    with pytest.raises(QueryError) as caught:
        compile_query(case.text, "query.rq")
    error = caught.value
    line, column = map(int, case.meta["error"][0].split(":"))
    assert (error.span.line, error.span.column) == (line, column), error.render()
    for expected in case.meta.get("message", []):
        assert expected.lower() in error.message.lower(), error.render()
    rendered = error.render()
    first_line = rendered.split("\n")[0]
    assert first_line.startswith(f"query.rq:{line}:{column}: error: ")
    assert len(error.message) < 400, "messages stay short"
    if error.span is not None and case.text.strip():
        caret_line = rendered.split("\n")[2]
        assert re.fullmatch(r"\s+\|\s*\^+", caret_line), rendered
        assert caret_line.index("^") - caret_line.index("|") - 2 == column - 1


def test_an_error_names_what_was_expected():
    with pytest.raises(QueryError) as caught:
        compile_query("SELECT ?x WHERE { ?x <http://e/p> ?y ")
    assert "expected" in caught.value.message and "'}'" in caught.value.message
