"""Reading optimizer fixtures: the plan a rule receives, optional statistics, and the pattern it should give.

A case is a ``### name`` block: optional ``# statistics: <source> pred=count …`` lines (``<source>`` is a
stream or graph IRI in angle brackets, or ``default``; predicates may use the plan's prefixes), the input plan
as ``format_plan`` prints it, a line ``---``, and the expected pattern as an S-expression. The test applies
the rule under test alone to the input plan and compares the printed pattern, so a change to an earlier rule
does not change what a later rule's fixtures test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rdflib import URIRef

from csparql.core.algebra.operators import QueryPlan
from csparql.core.algebra.sexpr import format_operator
from csparql.core.algebra.sexpr_reader import read_plan
from csparql.core.optimizer import RULES, SourceStatistics
from support import FIXTURES, read_blocks

OPTIMIZER_FIXTURES = FIXTURES / "optimizer"


@dataclass
class OptimizerCase:
    name: str
    plan: QueryPlan
    statistics: SourceStatistics
    expected: str


def read_cases(path: Path) -> list[OptimizerCase]:
    cases = []
    for block in read_blocks(path, metadata_keys=("statistics",)):
        text, _, expected = (block.text + "\n").partition("\n---\n")
        plan = read_plan(text)
        prefixes = dict(plan.prefixes)
        counts: dict = {}
        for line in block.meta.get("statistics", []):
            source, _, pairs = line.partition(" ")
            key = None if source == "default" else URIRef(source[1:-1])
            counts[key] = {expand(p.split("=")[0], prefixes): int(p.split("=")[1]) for p in pairs.split()}
        cases.append(OptimizerCase(block.name, plan, SourceStatistics(counts), expected.strip() + "\n"))
    return cases


def expand(name: str, prefixes: dict[str, str]) -> URIRef:
    if name.startswith("<"):
        return URIRef(name[1:-1])
    prefix, _, local = name.partition(":")
    return URIRef(prefixes[prefix] + local)


def rule_named(name: str):
    return next(rule for rule in RULES if rule.__name__ == name)


def plan_after(rule_name: str, case: OptimizerCase) -> str:
    """The printed pattern after the rule ``rule_name`` alone rewrote the case's input plan."""
    rewritten = rule_named(rule_name)(case.plan, case.statistics)
    return format_operator(rewritten.pattern, dict(case.plan.prefixes))
