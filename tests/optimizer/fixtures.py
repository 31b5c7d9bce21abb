"""Reading optimizer fixtures: a query, optional statistics, and the plan expected after a rule.

A case is a ``### name`` block: optional ``# statistics: <source> pred=count …`` lines (``<source>`` is a
stream or graph IRI in angle brackets, or ``default``; predicates may use the query's prefixes), the query,
a line ``---``, and the expected pattern as an S-expression. The test runs the optimizer's rules up to and
including the rule under test and compares the printed pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rdflib import URIRef

from csparql.algebra.sexpr import format_operator
from csparql.frontend import compile_query, parse_query
from csparql.optimizer import RULES, SourceStatistics, optimize
from support import FIXTURES, read_blocks

OPTIMIZER_FIXTURES = FIXTURES / "optimizer"


@dataclass
class OptimizerCase:
    name: str
    query: str
    statistics: SourceStatistics
    expected: str


def read_cases(path: Path) -> list[OptimizerCase]:
    cases = []
    for block in read_blocks(path, metadata_keys=("statistics",)):
        query, _, expected = (block.text + "\n").partition("\n---\n")
        prefixes = parse_query(query).prologue.prefix_map
        counts: dict = {}
        for line in block.meta.get("statistics", []):
            source, _, pairs = line.partition(" ")
            key = None if source == "default" else URIRef(source[1:-1])
            counts[key] = {expand(p.split("=")[0], prefixes): int(p.split("=")[1]) for p in pairs.split()}
        cases.append(OptimizerCase(block.name, query, SourceStatistics(counts), expected.strip() + "\n"))
    return cases


def expand(name: str, prefixes: dict[str, str]) -> URIRef:
    if name.startswith("<"):
        return URIRef(name[1:-1])
    prefix, _, local = name.partition(":")
    return URIRef(prefixes[prefix] + local)


def plan_after(rule_name: str, case: OptimizerCase) -> str:
    """The printed pattern after running the rules up to and including ``rule_name``."""
    index = [r.__name__ for r in RULES].index(rule_name)
    plan = compile_query(case.query, case.name)
    optimized = optimize(plan, case.statistics, rules=RULES[: index + 1])
    return format_operator(optimized.pattern, dict(plan.prefixes))
