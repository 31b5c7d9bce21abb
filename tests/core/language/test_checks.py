"""Decisions of the language that a reader should find spelled out as tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from csparql.core.windows import LogicalWindow
from support import REFUSED_SPEC_QUERIES, ROOT, SPEC_QUERIES

STREAM = "http://streams.org/tollgates"


def test_the_same_stream_twice_with_the_same_window_is_one_stream():
    plan = compile_query(
        f"SELECT * FROM STREAM <{STREAM}> [RANGE 10m STEP 1m] FROM STREAM <{STREAM}> [RANGE 10 MIN STEP 60 s] "
        "WHERE { ?s ?p ?o }"
    )
    assert [s.window for s in plan.streams] == [LogicalWindow(600_000_000, 60_000_000)]
    assert len(plan.dataset.default) == 2  # the window and the default static graph


def test_the_same_stream_with_two_windows_is_refused_naming_both():
    with pytest.raises(QueryError) as caught:
        compile_query(
            f"SELECT * FROM STREAM <{STREAM}> [RANGE 10m STEP 1m]\nFROM STREAM <{STREAM}> [RANGE 1h STEP 1m] "
            "WHERE { ?s ?p ?o }"
        )
    message = caught.value.message
    assert "[RANGE 10m STEP 1m]" in message and "[RANGE 1h STEP 1m]" in message
    assert (caught.value.span.line, caught.value.span.column) == (2, 13)


def test_tumbling_is_step_equal_to_range():
    a = compile_query(f"SELECT * FROM STREAM <{STREAM}> [RANGE 5m TUMBLING] WHERE {{ ?s ?p ?o }}")
    b = compile_query(f"SELECT * FROM STREAM <{STREAM}> [RANGE 5m STEP 5m] WHERE {{ ?s ?p ?o }}")
    assert a.dataset == b.dataset


def test_all_problems_of_a_query_are_reported_at_once():
    with pytest.raises(QueryError) as caught:
        compile_query(
            "REGISTER STREAM s AS SELECT ?x FROM STREAM <http://s> [RANGE 1m STEP 5m] "
            "WHERE { ?x <http://e/p> ?y } AGGREGATE { (?y, SUM, {?x}) }"
        )
    messages = [d.message for d in caught.value.diagnostics]
    assert len(messages) == 4, messages  # REGISTER STREAM, STEP > RANGE, ?y reused, SUM without argument


def test_vendored_specification_queries_match_the_specification_when_it_is_present():
    """The examples are the specification's queries and data, byte for byte but for their comments and READMEs,
    which are ours (they name the papers by title); the ones it prints as errors sit apart in refused/ beside a
    README of ours saying why."""
    shared = ROOT.parent / "shared" / "spec" / "queries"
    vendored = {_as_in_the_specification(p.relative_to(SPEC_QUERIES)): p
                for p in SPEC_QUERIES.rglob("*") if p.is_file() and p.name != "README.md"}
    assert len(vendored) >= 20
    assert (REFUSED_SPEC_QUERIES / "README.md").is_file()
    if shared.is_dir():  # on a developer machine the specification sits beside the repository
        original = {p.relative_to(shared): p for p in shared.rglob("*") if p.is_file() and p.name != "README.md"}
        assert sorted(vendored) == sorted(original)
        for relative, path in vendored.items():
            printed = _without_comments(original[relative].read_text(encoding="utf-8"))
            assert _without_comments(_as_printed(path.read_text(encoding="utf-8"))) == printed, relative


def _as_printed(vendored: str) -> str:
    """The query the specification prints: an example may register under a name of its own (so that every
    example writes its own result table) when a ``# name:`` comment above says what the paper calls it; the
    comment is dropped and the paper's name put back. Every other byte must match."""
    lines = vendored.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith("# name: the paper calls it "):
            paper_name = line.removeprefix("# name: the paper calls it ").split(";")[0].strip()
            end = index + 1
            while lines[end].startswith("#       "):
                end += 1
            keyword, own_name = lines[end].split()[1:3]
            assert keyword in ("QUERY", "STREAM") and own_name != paper_name
            lines[end] = lines[end].replace(f" {own_name} ", f" {paper_name} ", 1)
            del lines[index:end]
            break
    return "".join(lines)


def _without_comments(text: str) -> str:
    """The text without its whole-line ``#`` comments (the notes above a query or in a data file)."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def _as_in_the_specification(relative: Path) -> Path:
    """Where the specification keeps a vendored file: a refused query sits beside the valid ones there."""
    if relative.parts[0] == REFUSED_SPEC_QUERIES.name:
        return Path(*relative.parts[1:])
    return relative
