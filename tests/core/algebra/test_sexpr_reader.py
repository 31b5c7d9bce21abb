"""The S-expression reader is the printer's inverse: every plan of the specification's queries, the SRBench
queries, the language fixtures and the W3C queries reads back equal to itself, as translated and as optimized
(the printed form leaves out BASE only); the optimizer fixtures' input plans read and print back unchanged; and
text that is not a plan is refused with its line and column."""

from __future__ import annotations

import dataclasses

import pytest
from rdflib import BNode, URIRef, Variable

from csparql.core.algebra.operators import QueryPlan
from csparql.core.algebra.sexpr import format_operator, format_plan
from csparql.core.algebra.sexpr_reader import SexprError, read_expression, read_operator, read_plan
from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from csparql.core.language.expressions import In
from csparql.core.optimizer import optimize
from csparql.core.terms import XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, literal
from core.optimizer.fixtures import OPTIMIZER_FIXTURES
from support import FIXTURES, LANGUAGE_FIXTURES, ROOT, SPEC_QUERIES, read_blocks

CORPORA = {
    "specification": lambda: [(p.name, p.read_text(encoding="utf-8")) for p in sorted(SPEC_QUERIES.glob("*.rq"))],
    "srbench": lambda: [(p.name, p.read_text(encoding="utf-8"))
                        for p in sorted((ROOT / "examples" / "srbench").glob("*.rq"))],
    "language fixtures": lambda: [(f"valid_queries.rq:{b.name}", b.text)
                                  for b in read_blocks(LANGUAGE_FIXTURES / "valid_queries.rq")],
    "w3c": lambda: [(str(p.relative_to(FIXTURES)), p.read_text(encoding="utf-8"))
                    for p in sorted((FIXTURES / "w3c").rglob("*.rq"))],
}


def plans_of(corpus: str) -> list[tuple[str, QueryPlan]]:
    plans = []
    for name, text in CORPORA[corpus]():
        try:
            plans.append((name, compile_query(text, name)))
        except (QueryError, UnicodeDecodeError):
            continue  # the corpora hold refused queries too
    return plans


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_every_plan_reads_back_equal_to_itself_translated_and_optimized(corpus):
    plans = plans_of(corpus)
    assert len(plans) >= {"specification": 15, "srbench": 17, "language fixtures": 200, "w3c": 600}[corpus]
    differ = []
    for name, plan in plans:
        for stage, shown in (("translated", plan), ("optimized", optimize(plan))):
            if read_plan(format_plan(shown)) != dataclasses.replace(shown, base=None):
                differ.append(f"{name} ({stage})")
            prefixes = dict(shown.prefixes)
            if read_operator(format_operator(shown.pattern, prefixes), prefixes) != shown.pattern:
                differ.append(f"{name} ({stage} pattern)")
    assert not differ, differ


def test_the_optimizer_fixtures_input_plans_print_back_as_written():
    inputs = []
    for path in sorted(OPTIMIZER_FIXTURES.glob("*.txt")):
        for block in read_blocks(path, metadata_keys=("statistics",)):
            text = block.text.partition("\n---\n")[0] + "\n"
            inputs.append((f"{path.name}:{block.name}", text))
    assert len(inputs) >= 40
    assert [name for name, text in inputs if format_plan(read_plan(text)) != text] == []


def test_terms_read_as_the_translation_builds_them():
    text = '(in ?x ex:a 7 2.5 1e3 true "CH" "CH"@de-ch "7"^^ex:n "a\\"b\\n" _:b0)'
    expression = read_expression(text, {"ex": "http://e/"})
    assert expression == In(Variable("x"), (
        URIRef("http://e/a"), literal("7", XSD_INTEGER), literal("2.5", XSD_DECIMAL), literal("1e3", XSD_DOUBLE),
        literal("true", XSD_BOOLEAN), literal("CH"), literal("CH", language="de-ch"), literal("7", "http://e/n"),
        literal('a"b\n'), BNode("b0")))


@pytest.mark.parametrize(("text", "message"), [
    ("(project (?a)\n  (bgp (triple ?a ?b ?c))", "line 1, column 1: '(' is never closed"),
    ("(bgp))", "line 1, column 6: ')' closes nothing"),
    ("(bgp (triple ?a ex:p ?c))", "line 1, column 17: the prefix 'ex' of ex:p is not declared"),
    ("(join\n  (bgp)\n  (frobnicate))", "line 3, column 3: unknown operator (frobnicate …)"),
    ("(filter (~ ?a 1) (bgp))", "line 1, column 9: unknown function or operator '~'"),
    ("(slice x 2 (bgp))", "line 1, column 1: (slice start length …) takes numbers ('_': no limit)"),
    ("(bgp) (bgp)", "line 1, column 7: expected one S-expression, found 2"),
    ("(bgp (from (window <http://s> (range 5m) (step 10m))))",
     "line 1, column 12: window STEP 10m is longer than its RANGE 5m"),
])
def test_text_that_is_not_a_plan_is_refused_with_its_place(text, message):
    with pytest.raises(SexprError) as refused:
        read_operator(text)
    assert message in str(refused.value)
