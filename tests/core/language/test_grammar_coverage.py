"""The fixture corpus exercises every rule and every named terminal of the grammar (SERVICE aside: it is
parsed only to be refused)."""

from __future__ import annotations

from lark import Token

from csparql.core.language.parser import lark_parser
from support import LANGUAGE_FIXTURES, read_blocks, spec_query_files

REFUSED = {"service_graph_pattern", "SERVICE", "SILENT"}
IGNORED_TERMINALS = {"WS", "COMMENT"}


def used_rules_and_terminals() -> tuple[set[str], set[str]]:
    rules: set[str] = set()
    terminals: set[str] = set()
    texts = [b.text for b in read_blocks(LANGUAGE_FIXTURES / "valid_queries.rq")]
    texts += [p.read_text(encoding="utf-8") for p in spec_query_files()]
    parser = lark_parser()
    for text in texts:
        tree = parser.parse(text)
        for node in tree.iter_subtrees():
            rules.add(node.data)
            terminals.update(child.type for child in node.children if isinstance(child, Token))
    return rules, terminals


def grammar_rules_and_terminals() -> tuple[set[str], set[str]]:
    """Rule names (aliases included) that appear as tree nodes, and the grammar's named terminals."""
    parser = lark_parser()
    rules = set()
    for rule in parser.rules:
        name = rule.alias or rule.origin.name
        if rule.options.expand1 and not rule.alias:
            continue  # a '?rule' with one child leaves no node of its own
        if not str(name).startswith("_"):
            rules.add(str(name))
    # Terminals that stay in the tree: those some rule uses without filtering them out (anonymous
    # punctuation such as "{" is filtered out and cannot be counted there).
    terminals = {
        symbol.name
        for rule in parser.rules
        for symbol in rule.expansion
        if symbol.is_term and not getattr(symbol, "filter_out", False)
    }
    return rules, terminals - IGNORED_TERMINALS


def test_every_grammar_rule_and_terminal_is_exercised():
    rules, terminals = grammar_rules_and_terminals()
    used_rules, used_terminals = used_rules_and_terminals()
    missing_rules = rules - used_rules - REFUSED
    missing_terminals = terminals - used_terminals - REFUSED
    assert not missing_rules, f"rules no fixture query uses: {sorted(missing_rules)}"
    assert not missing_terminals, f"terminals no fixture query uses: {sorted(missing_terminals)}"
