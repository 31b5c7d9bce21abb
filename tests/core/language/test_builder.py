"""The tree builders' dispatch tables: each maps rules of the grammar to methods the builder has."""

from __future__ import annotations

import pytest

from csparql.core.language.builder import TreeBuilder
from csparql.core.language.parser import lark_parser
from csparql.core.language.rspql import RspqlTreeBuilder

TABLES = ("QUERY_FORMS", "MODIFIERS", "GROUP_ELEMENTS", "UNION_OPERANDS", "VERBS", "NODES", "PATHS", "TERMS",
          "EXPRESSIONS")


@pytest.mark.parametrize("builder, dialect", [(TreeBuilder, "csparql"), (RspqlTreeBuilder, "rspql")])
def test_every_table_maps_rules_of_the_grammar_to_methods_of_the_builder(builder, dialect):
    rules = {str(rule.alias or rule.origin.name) for rule in lark_parser(dialect).rules}
    for table in TABLES:
        entries = getattr(builder, table)
        assert set(entries) <= rules, (table, set(entries) - rules)
        assert all(callable(getattr(builder, method, None)) for method in entries.values()), table


def test_the_rspql_builder_reads_window_patterns_as_union_operands():
    assert RspqlTreeBuilder.UNION_OPERANDS == {**TreeBuilder.UNION_OPERANDS, "window_graph_pattern": "window_graph_pattern"}
    assert "window_graph_pattern" not in TreeBuilder.UNION_OPERANDS
