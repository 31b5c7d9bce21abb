"""The limits of the language (docs/language.md, "Limits"): what is beyond them is refused by the front end that
every command shares, where it is written and naming the limit; what is within them goes through every later
stage (translation, optimizer, printers) without hitting Python's recursion limit."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from csparql.core.algebra.sexpr import format_plan
from csparql.cli import main
from csparql.core.frontend import compile_query, parse_query
from csparql.core.language.dialect import detect_dialect
from csparql.core.language.errors import EXCERPT_WIDTH, MAX_REPORTED, Diagnostic, QueryError, Span
from csparql.core.language.limits import MAX_NESTING, MAX_QUERY_CHARACTERS, MAX_TERMS, nesting_depth
from csparql.core.language.parser import lark_parser
from csparql.core.language.printer import format_query
from csparql.core.optimizer import SourceStatistics, optimize
from csparql.core.schedule import Schedule
from csparql.core.windows import MAX_COUNT, MAX_DURATION, format_instant
from support import ROOT

STREAM = "http://streams.example.org/s"
TRIPLE = "?s <http://example.org/p> ?o"
WINDOW = f"FROM STREAM <{STREAM}> [RANGE 1h STEP 1h]"


def refusal(text: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        compile_query(text, "query.rq")
    return caught.value


def place(error: QueryError) -> tuple[int, int]:
    return error.span.line, error.span.column


# --- durations and counts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "written", "what"),
    [
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE 99999999999999999999d STEP 1m] WHERE {{ {TRIPLE} }}",
         "99999999999999999999d", "the window RANGE"),
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE 36526d STEP 1m] WHERE {{ {TRIPLE} }}", "36526d", "the window RANGE"),
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE 876601 hours TUMBLING] WHERE {{ {TRIPLE} }}",
         "876601 hours", "the window RANGE"),
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE 36525d STEP 36526d] WHERE {{ {TRIPLE} }}", "36526d", "the window STEP"),
        (f"REGISTER QUERY Q COMPUTED EVERY 99999999999999999999d AS SELECT * {WINDOW} WHERE {{ {TRIPLE} }}",
         "99999999999999999999d", "COMPUTED EVERY"),
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE {'9' * 5000}d STEP 1m] WHERE {{ {TRIPLE} }}",
         "9" * 5000 + "d", "the window RANGE"),
    ],
    ids=["range-20-digits", "range-a-day-too-long", "range-in-hours", "step", "computed-every", "range-5000-digits"],
)
def test_a_duration_longer_than_100_years_is_refused_where_it_is_written(text, written, what):
    error = refusal(text)
    assert place(error) == (1, text.index(written) + 1)
    assert error.message == f"{what} is longer than 36525d (100 years), the longest duration csparql accepts"
    assert len(error.render()) < 1000


def test_durations_of_100_years_are_accepted_and_their_windows_are_representable():
    plan = compile_query(
        f"REGISTER QUERY Q COMPUTED EVERY 36525d AS SELECT * FROM STREAM <{STREAM}> [RANGE 36525d TUMBLING] "
        f"WHERE {{ {TRIPLE} }}")
    assert plan.streams[0].window.range == MAX_DURATION and plan.registration.computed_every == MAX_DURATION
    # evaluations every 100 years from the epoch: the latest one before 2070 is at the epoch
    evaluation = Schedule.of(plan).latest_evaluation(1_700_000_000_000_000)
    assert (evaluation.at, evaluation.start) == (0, -MAX_DURATION)
    assert format_instant(evaluation.start) == "1869-12-31T00:00:00Z"


@pytest.mark.parametrize(
    ("text", "written", "clause"),
    [
        (f"SELECT * FROM STREAM <{STREAM}> [TRIPLES 2147483648] WHERE {{ {TRIPLE} }}", "2147483648", "TRIPLES"),
        (f"SELECT * FROM STREAM <{STREAM}> [TRIPLES {'9' * 5000}] WHERE {{ {TRIPLE} }}", "9" * 5000, "TRIPLES"),
        (f"SELECT * WHERE {{ {TRIPLE} }} LIMIT 99999999999999999999", "99999999999999999999", "LIMIT"),
        (f"SELECT * WHERE {{ {TRIPLE} }} LIMIT {'9' * 5000}", "9" * 5000, "LIMIT"),
        (f"SELECT * WHERE {{ {TRIPLE} }} OFFSET 2147483648", "2147483648", "OFFSET"),
    ],
    ids=["triples", "triples-5000-digits", "limit", "limit-5000-digits", "offset"],
)
def test_a_count_beyond_what_spark_takes_is_refused_where_it_is_written(text, written, clause):
    error = refusal(text)
    assert place(error) == (1, text.index(written) + 1)
    assert error.message.startswith(f"{clause} takes a whole number of at most 2,147,483,647, not ")
    assert len(error.render()) < 1000


def test_counts_up_to_the_limit_are_accepted():
    plan = compile_query(
        f"SELECT * FROM STREAM <{STREAM}> [TRIPLES {MAX_COUNT}] WHERE {{ {TRIPLE} }} LIMIT {MAX_COUNT} OFFSET {MAX_COUNT}")
    assert plan.streams[0].window.count == MAX_COUNT


def test_an_integer_longer_than_python_reads_is_refused_without_a_logged_traceback(caplog):
    text = f"SELECT * WHERE {{ {TRIPLE} FILTER(?o > {'9' * 4301}) }}"
    with caplog.at_level(logging.DEBUG):
        error = refusal(text)
        compile_query(f"SELECT * WHERE {{ {TRIPLE} FILTER(?o > {'9' * 4300}) }}")
    assert place(error) == (1, text.index("9999") + 1)
    assert error.message == "this integer has 4,301 digits; csparql reads integers of at most 4,300 digits"
    assert not caplog.records


# --- nesting --------------------------------------------------------------------------------------------


def where(body: str, head: str = "SELECT *") -> str:
    return f"{head} {WINDOW} WHERE {{ {body} }}"


def nested_union(depth: int) -> str:
    body = TRIPLE
    for _ in range(depth):
        body = f"{{ {body} }} UNION {{ {TRIPLE} }}"
    return where(body)


# Queries that nest as deeply as their size; each grows one level (or two) per unit of size.
SHAPES = {
    "nested groups": lambda n: where("{ " * n + TRIPLE + " }" * n),
    "nested OPTIONALs": lambda n: where(TRIPLE + " OPTIONAL { " * n + TRIPLE + " }" * n),
    "OPTIONALs in one group": lambda n: where(TRIPLE + f" OPTIONAL {{ {TRIPLE} }}" * n),
    "UNION operands": lambda n: where(" UNION ".join([f"{{ {TRIPLE} }}"] * n)),
    "nested UNIONs": nested_union,
    "nested MINUS": lambda n: where(TRIPLE + " MINUS { " * n + TRIPLE + " }" * n),
    "nested GRAPH": lambda n: where("GRAPH ?g { " * n + TRIPLE + " }" * n),
    "FILTERs in one group": lambda n: where(TRIPLE + " FILTER(?o != 1)" * n),
    "BINDs in one group": lambda n: where(TRIPLE + "".join(f" BIND(?o AS ?b{i})" for i in range(n))),
    "a sum": lambda n: where(f"{TRIPLE} FILTER(" + " + ".join(["?o"] * n) + " > 1)"),
    "a sum of signed numbers": lambda n: where(f"{TRIPLE} FILTER(1" + " +1" * n + " > ?o)"),
    "a disjunction": lambda n: where(f"{TRIPLE} FILTER(" + " || ".join(["?o = 1"] * n) + ")"),
    "nested negations": lambda n: where(f"{TRIPLE} FILTER(" + "-(" * n + "?o" + ")" * n + " > 1)"),
    "nested function calls": lambda n: where(f"{TRIPLE} FILTER(" + "STR(" * n + "?o" + ")" * n + " != '')"),
    "nested IFs": lambda n: where(f"{TRIPLE} FILTER(" + "IF(true, " * n + "?o" + ", 1)" * n + " != 1)"),
    "nested EXISTS": lambda n: where(TRIPLE + " FILTER EXISTS { " * n + TRIPLE + " }" * n),
    "nested sub-selects": lambda n: where("{ SELECT * WHERE " * n + f"{{ {TRIPLE} }}" + " }" * n),
    "path patterns in one block": lambda n: where(" . ".join(f"?s <http://example.org/p>* ?o{i}" for i in range(n))),
    "nested paths": lambda n: where("?s " + "(" * n + "<http://example.org/p>" + ")*" * n + " ?o"),
    "nested collections": lambda n: where("?s <http://example.org/p> " + "(" * n + "1" + ")" * n),
    "nested blank nodes": lambda n: where("?s <http://example.org/p> " + "[ <http://example.org/p> " * n + "1" + " ]" * n),
    "SELECT expressions": lambda n: where(TRIPLE, "SELECT ?s " + " ".join(f"(?o AS ?e{i})" for i in range(n))),
    "HAVING conditions": lambda n: f"SELECT ?s (COUNT(?o) AS ?n) {WINDOW} WHERE {{ {TRIPLE} }} GROUP BY ?s HAVING "
                                   + " ".join(["(COUNT(?o) > 0)"] * n),
}


def depth_of(text: str) -> int:
    """How deep a query nests, parsed in its own dialect (the examples hold RSP-QL queries too)."""
    return nesting_depth(lark_parser(detect_dialect(text)).parse(text))


def largest_accepted(shape) -> int:
    """The largest size of a shape that nests at most MAX_NESTING levels (the depth grows linearly with size)."""
    one, two = depth_of(shape(1)), depth_of(shape(2))
    size = 1 + (MAX_NESTING - one) // (two - one)
    assert depth_of(shape(size)) <= MAX_NESTING < depth_of(shape(size + 1))
    return size


def with_frames_used(frames: int, function):
    """``function()`` called from ``frames`` frames deep, as from inside a server or a task runner."""
    return function() if frames == 0 else with_frames_used(frames - 1, function)


def every_stage(text: str) -> None:
    """What the commands and the register page do with a query: check and print it, compile and optimize it,
    print both plans."""
    format_query(parse_query(text))
    plan = compile_query(text)
    format_plan(plan)
    format_plan(optimize(plan, SourceStatistics({})))


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_at_the_nesting_limit_every_stage_works_with_room_to_spare(shape):
    text = SHAPES[shape](largest_accepted(SHAPES[shape]))
    frames = sys.getrecursionlimit() // 2  # a caller that already used half of Python's stack
    with_frames_used(frames, lambda: every_stage(text))


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_beyond_the_nesting_limit_a_query_is_refused_with_its_place(shape):
    text = SHAPES[shape](largest_accepted(SHAPES[shape]) + 1)
    error = refusal(text)
    assert error.message.startswith(f"the query nests more than {MAX_NESTING} levels deep here")
    assert error.span is not None and error.span.line == 1


def test_the_examples_of_the_documentation_hold():
    """docs/language.md: 64 groups (WHERE's included), 63 OPTIONALs in a group, a sum of 63 terms; not one more."""
    groups = lambda n: "SELECT * WHERE " + "{ " * n + TRIPLE + " }" * n  # noqa: E731
    patterns = lambda n: "SELECT * WHERE { " + " ".join([f"OPTIONAL {{ {TRIPLE} }}"] * n) + " }"  # noqa: E731
    terms = lambda n: f"SELECT * WHERE {{ FILTER({' + '.join(['?o'] * n)} > 1) }}"  # noqa: E731
    for shape, most in ((groups, 64), (patterns, 63), (terms, 63)):
        compile_query(shape(most))
        assert refusal(shape(most + 1)).message.startswith("the query nests more than 64 levels deep here")


def test_500_nested_groups_are_refused_at_the_group_that_crosses_the_limit():
    text = "SELECT * WHERE " + "{ " * 500 + TRIPLE + " }" * 500
    error = refusal(text)
    # WHERE's group is the first level: the 65th '{' is one too many
    assert place(error) == (1, len("SELECT * WHERE ") + 2 * MAX_NESTING + 1)
    rendered = error.render()
    assert rendered.startswith(f"query.rq:1:{len('SELECT * WHERE ') + 2 * MAX_NESTING + 1}: error: the query nests more")
    assert len(rendered) < 1000 and "…" in rendered


def test_nested_groups_on_many_lines_are_refused_on_the_line_that_crosses_the_limit():
    text = "SELECT * WHERE {\n" + "".join(f"{'  ' * i}{{\n" for i in range(1, 100)) + TRIPLE + "\n}" * 100
    assert place(refusal(text)) == (MAX_NESTING + 1, 2 * MAX_NESTING + 1)


def test_500_nested_optionals_are_refused_inside_the_optional_that_crosses_the_limit():
    text = "SELECT * WHERE { " + f"{TRIPLE} OPTIONAL {{ " * 500 + TRIPLE + " }" * 500 + " }"
    error = refusal(text)
    # WHERE's group is level 1 and the group of the 63rd OPTIONAL level 64; inside it, the triples are
    # joined to the 64th OPTIONAL (one level more)
    before = text[: error.span.column - 1]
    assert before.count("OPTIONAL") == MAX_NESTING - 1 and text[error.span.column - 1:].startswith(TRIPLE)


def test_a_long_group_is_refused_at_its_first_pattern_which_the_algebra_nests_deepest():
    text = "SELECT * WHERE { " + TRIPLE + f" OPTIONAL {{ {TRIPLE} }}" * 2000 + " }"
    assert place(refusal(text)) == (1, len("SELECT * WHERE { ") + 1)


@pytest.mark.parametrize(
    "expression", [" + ".join(["?o"] * 10_000), "1" + "+1" * 10_000, " || ".join(["?o"] * 10_000)],
    ids=["sum", "signed-numbers", "disjunction"])
def test_an_expression_of_10000_terms_is_refused_at_an_operator(expression):
    text = f"SELECT * WHERE {{ {TRIPLE} FILTER({expression}) }}"
    error = refusal(text)
    assert text[error.span.column - 1] in "+?"
    assert len(error.render()) < 1000


def test_brackets_around_an_expression_add_no_level():
    text = f"SELECT * WHERE {{ {TRIPLE} FILTER({'(' * 5000}?o > 1{')' * 5000}) }}"
    assert depth_of(text) == depth_of(f"SELECT * WHERE {{ {TRIPLE} FILTER(?o > 1) }}")
    every_stage(text)


def test_5000_negations_are_a_syntax_error_reported_in_a_few_lines():
    text = f"SELECT * WHERE {{ {TRIPLE} FILTER({'!' * 5000}?o) }}"
    rendered = refusal(text).render()
    assert len(rendered) < 1000 and rendered.count("\n") == 2


def test_real_queries_are_far_from_the_nesting_limit():
    queries = sorted((ROOT / "examples").rglob("*.rq"))
    assert len(queries) > 20
    assert max(depth_of(path.read_text(encoding="utf-8")) for path in queries) <= MAX_NESTING // 3


# --- size -----------------------------------------------------------------------------------------------


def triple_patterns(count: int) -> str:
    return " ".join(f"?s <http://example.org/p{i}> ?o{i} ." for i in range(count))


def test_a_query_longer_than_the_limit_is_refused_before_it_is_parsed():
    text = f"SELECT * WHERE {{ {triple_patterns(40_000)} }} )"
    assert len(text) > 1_000_000
    for front_end in (compile_query, parse_query):
        with pytest.raises(QueryError) as caught:
            front_end(text, "big.rq")
        assert caught.value.render() == (
            f"big.rq: error: the query is {len(text):,} characters long; csparql accepts queries of at most "
            f"{MAX_QUERY_CHARACTERS:,} characters (docs/language.md, Limits)")


def test_a_long_one_line_query_gets_an_error_of_a_few_lines_around_its_place():
    text = f"SELECT * WHERE {{ {triple_patterns(5_000)} }} )"
    assert 100_000 < len(text) <= MAX_QUERY_CHARACTERS
    rendered = refusal(text).render()
    head, excerpt, caret = rendered.split("\n")
    assert head.startswith(f"query.rq:1:{len(text)}: error: unexpected ')'")
    assert len(rendered) < 1000 and excerpt.endswith(")") and excerpt[caret.index("^")] == ")"


def one_literal_objects(terms: int) -> str:
    """A query of ``terms`` terms in one block of triples: ``?s ?p`` and an object list of ``1``s, one triple
    pattern per object (the most patterns a query of this many characters can hold)."""
    return "SELECT * WHERE { ?s ?p 1" + ",1" * (terms - 3) + " }"


@pytest.mark.parametrize("dialect", ["csparql", "rspql"])
def test_a_query_of_more_terms_than_the_limit_is_refused_where_it_crosses_it_before_its_tree_is_built(
        dialect, monkeypatch):
    from csparql.core.language import parser

    text = one_literal_objects(99_908)  # 99,906 triple patterns
    assert len(text) <= MAX_QUERY_CHARACTERS
    walked = []
    monkeypatch.setattr(parser, "check_nesting", walked.append)
    with pytest.raises(QueryError) as caught:
        compile_query(text, "big.rq", dialect=dialect)
    assert not walked  # refused while it was being parsed, before anything walked its tree
    first_beyond = len("SELECT * WHERE { ?s ?p 1") + 2 * (MAX_TERMS - 2)  # the column of the 30,001st term
    assert place(caught.value) == (1, first_beyond)
    assert caught.value.render().split("\n")[0] == (
        f"big.rq:1:{first_beyond}: error: the query has more than 30,000 terms (variables, IRIs, literals, blank "
        "nodes) here; csparql reads at most 30,000, about 10,000 triple patterns (docs/language.md, Limits)")


def test_a_query_of_as_many_terms_as_the_limit_is_read_whole():
    plan = compile_query(one_literal_objects(MAX_TERMS))
    assert format_plan(plan).count("?s ?p 1") == MAX_TERMS - 2
    with pytest.raises(QueryError, match="more than 30,000 terms"):
        compile_query(one_literal_objects(MAX_TERMS + 1))


def test_every_kind_of_term_counts_toward_the_limit():
    kinds = ["?v", "$v", "<http://e/x>", "p:x", "p:", "_:b", "[]", "()", "'s'", '"s"', "'''s'''", '"""s"""', "true",
             "false", "1", "1.5", "1e3", "+1", "+1.5", "+1e3", "-1", "-1.5", "-1e3"]
    head = "PREFIX p: <http://e/> SELECT * WHERE { ?s a "
    # the prefix declaration, the subject and the predicate are 4 terms: the objects bring them to one beyond
    objects = [kinds[i % len(kinds)] for i in range(MAX_TERMS - 3)]
    error = refusal(head + " , ".join(objects) + " }")
    assert "more than 30,000 terms" in error.diagnostics[0].message
    assert place(error) == (1, len(head) + len(" , ".join(objects[:-1])) + len(" , ") + 1)
    values = f"SELECT * WHERE {{ {TRIPLE} }} VALUES ?o {{ " + "UNDEF " * (MAX_TERMS - 2) + "}"
    assert "more than 30,000 terms" in refusal(values).diagnostics[0].message


def test_the_optimizer_orders_a_large_pattern_in_linear_cost_evaluations(monkeypatch):
    from csparql.core.optimizer import order_joins

    plan = compile_query(f"SELECT * WHERE {{ {triple_patterns(2_000)} }}")
    calls = []
    original = order_joins._triple_cost
    monkeypatch.setattr(order_joins, "_triple_cost", lambda *args: calls.append(1) or original(*args))
    optimized = optimize(plan, SourceStatistics({}))
    assert format_plan(optimized).count("?s <http://example.org/p") == 2_000
    assert len(calls) < 10_000  # about once per pattern, not once per pattern and step


# --- reports --------------------------------------------------------------------------------------------


def test_a_report_on_a_very_long_line_shows_a_window_around_its_place():
    line = "x" * 600_000 + "BAD" + "y" * 600_000
    rendered = Diagnostic("bad", Span(1, 600_001, 3)).render(line, "q.rq")
    head, excerpt, caret = rendered.split("\n")
    assert head == "q.rq:1:600001: error: bad"
    assert excerpt.startswith("  1 | …") and excerpt.endswith("…")
    assert len(excerpt) <= EXCERPT_WIDTH + 10 and caret.count("^") == 3
    assert excerpt[caret.index("^"):caret.index("^") + 3] == "BAD"


def test_a_report_shows_a_short_line_whole():
    rendered = Diagnostic("bad", Span(2, 5, 2)).render("first\nabc XY def\nthird", "q.rq")
    assert rendered == "q.rq:2:5: error: bad\n  2 | abc XY def\n    |     ^^"


def test_a_long_message_loses_its_middle():
    message = "unexpected '" + "z" * 100_000 + "'; expected '}'"
    kept = Diagnostic(message).message
    assert len(kept) <= 600 and kept.startswith("unexpected 'zzz") and kept.endswith("; expected '}'")


def test_a_report_shows_the_first_problems_and_counts_the_others():
    clauses = " ".join(f"AGGREGATE {{ (?n{i}, SUM, {{?s}}) }}" for i in range(MAX_REPORTED + 5))
    error = refusal(f"SELECT * WHERE {{ {TRIPLE} }} {clauses}")
    assert len(error.diagnostics) == MAX_REPORTED + 5
    lines = error.render().split("\n")
    assert len(lines) == 3 * MAX_REPORTED + 1 and lines[-1] == "query.rq: … and 5 more problems"


# --- the command line -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT * WHERE " + "{ " * 500 + TRIPLE + " }" * 500, "the query nests more than 64 levels deep here"),
        ("SELECT * WHERE { ?s ?p ?o " + "OPTIONAL { ?s ?p ?o " * 500 + "}" * 500 + " }",
         "the query nests more than 64 levels deep here"),
        (f"SELECT * WHERE {{ {TRIPLE} FILTER(" + " + ".join(["?o"] * 10_000) + ") }",
         "the query nests more than 64 levels deep here"),
        ("SELECT * WHERE { ?s ?p 1" + ",1" * 99_905 + " }", "the query has more than 30,000 terms"),
        (f"REGISTER QUERY Q COMPUTED EVERY 99999999999999999999d AS SELECT * {WINDOW} WHERE {{ {TRIPLE} }}",
         "COMPUTED EVERY is longer than 36525d (100 years)"),
        (f"SELECT * FROM STREAM <{STREAM}> [RANGE 99999999999999999999d STEP 1m] WHERE {{ {TRIPLE} }}",
         "the window RANGE is longer than 36525d (100 years)"),
        (f"SELECT * WHERE {{ {triple_patterns(40_000)} }} )", "characters long; csparql accepts queries of at most"),
    ],
    ids=["500-groups", "500-optionals", "10000-terms", "99906-patterns", "computed-every", "range", "1.2-MB"],
)
@pytest.mark.parametrize("command", ["check", "explain"])
def test_check_and_explain_refuse_in_a_few_lines_without_a_traceback(command, text, expected, tmp_path, capsys):
    query = tmp_path / "q.rq"
    query.write_text(text, encoding="utf-8")
    assert main([command, str(query)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and "internal error" not in err
    assert re.match(rf"{re.escape(str(query))}(:\d+:\d+)?: error: ", err) and expected in err
    assert len(err) < 1500


def test_register_refuses_an_unrepresentable_schedule_and_leaves_the_registry_alone(tmp_path, monkeypatch, capsys):
    registry = tmp_path / "registry"
    registry.mkdir()
    monkeypatch.setenv("CSPARQL_REGISTRY", str(registry))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "warehouse"))
    query = tmp_path / "q.rq"
    query.write_text(f"REGISTER QUERY Q COMPUTED EVERY 99999999999999999999d AS SELECT * {WINDOW} WHERE {{ {TRIPLE} }}")
    assert main(["register", str(query)]) == 1
    err = capsys.readouterr().err
    assert "q.rq:1:33: error: COMPUTED EVERY is longer than 36525d (100 years)" in err and "internal error" not in err
    assert not list(registry.iterdir())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["run", "--at", "99999999999999999"],
         "csparql: --at: the instant '99999999999999999' is outside the instants csparql evaluates, "
         "1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z\n"),
        (["run", "--at", "0001-01-01T00:00:00Z"],
         "csparql: --at: the instant '0001-01-01T00:00:00Z' is outside the instants csparql evaluates, "
         "1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z\n"),
        (["replay", "--from", "0001-01-01T00:00:00Z", "--to", "2010-01-01T00:00:00Z"],
         "csparql: --from: the instant '0001-01-01T00:00:00Z' is outside the instants csparql evaluates, "
         "1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z\n"),
        (["replay", "--from", "2010-01-01T00:00:00Z", "--to", "9999-12-31T23:59:59Z"],
         "csparql: --to: the instant '9999-12-31T23:59:59Z' is outside the instants csparql evaluates, "
         "1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z\n"),
    ],
    ids=["run-epoch-millis", "run-year-1", "replay-from", "replay-to"],
)
def test_run_and_replay_refuse_an_instant_outside_the_range_in_one_line(arguments, message, tmp_path, capsys):
    query = ROOT / "examples" / "queries" / "04-cars-per-district.rq"
    command, *options = arguments
    assert main([command, str(query), *options, "--warehouse", str(tmp_path)]) == 1
    assert capsys.readouterr().err == message


def test_replay_refuses_a_range_of_more_evaluations_than_it_can_list(tmp_path, capsys):
    query = ROOT / "examples" / "queries" / "04-cars-per-district.rq"  # every 5 minutes
    arguments = ["replay", str(query), "--from", "1500-01-01T00:00:00Z", "--to", "9500-01-01T00:00:00Z"]
    assert main([*arguments, "--warehouse", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        "csparql: the range holds about 841,518,721 evaluations (one every 5m); a replay evaluates at most "
        "100,000: split the range\n")
