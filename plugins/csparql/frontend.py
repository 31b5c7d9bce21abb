"""The front end in one call: text to checked syntax tree to algebra.

``compile_query(text)`` parses, checks and translates a C-SPARQL query and returns its ``QueryPlan``; any
problem is a ``QueryError`` whose ``str()`` shows every diagnostic with line, column and caret. The
translation is the algebra layer's (``csparql.algebra.translate.Translation``), done once.
"""

from __future__ import annotations

from csparql.algebra.operators import QueryPlan
from csparql.algebra.translate import Translation
from csparql.algebra.variables import in_scope
from csparql.language import syntax as sx
from csparql.language.checks import check
from csparql.language.errors import QueryError, QuerySemanticError
from csparql.language.parser import parse


def parse_query(text: str, source_name: str = "<query>") -> sx.Query:
    """The syntax tree of a query that parses, translates and keeps every C-SPARQL rule."""
    query, _ = _front_end(text, source_name)
    return query


def compile_query(text: str, source_name: str = "<query>") -> QueryPlan:
    """The algebra of a valid query; raises ``QueryError`` (with every problem found) otherwise."""
    _, plan = _front_end(text, source_name)
    return plan


def _front_end(text: str, source_name: str) -> tuple[sx.Query, QueryPlan]:
    query = parse(text, source_name)
    try:
        # One translation: the checks read the variables the WHERE clause binds from its pattern, and the
        # rest of the plan is built on that pattern once they pass (the algebra needs valid windows).
        translation = Translation(query)
        bound_in_where = in_scope(translation.where()) if query.where is not None else ()
        problems = check(query, bound_in_where)
        if problems:
            raise QuerySemanticError(problems)
        plan = translation.plan()
    except QueryError as error:
        raise error.with_source(text, source_name) from None
    return query, plan
