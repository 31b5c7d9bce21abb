"""The front end in one call: text to checked syntax tree to algebra.

``compile_query(text)`` parses, checks and translates a query and returns its ``QueryPlan``; any problem is a
``QueryError`` whose ``str()`` shows every diagnostic with line, column and caret. The translation is the
algebra layer's (``csparql.core.algebra.translate.Translation``), done once. Queries are read in either of two
dialects, C-SPARQL and RSP-QL, told apart from the text (``csparql.core.language.dialect``) unless ``dialect`` says
which; both give the same syntax tree, so everything after the front end is the same.
"""

from __future__ import annotations

from csparql.core.algebra.operators import QueryPlan
from csparql.core.algebra.translate import Translation
from csparql.core.algebra.variables import in_scope
from csparql.core.language import syntax as sx
from csparql.core.language.checks import check
from csparql.core.language.dialect import CSPARQL, RSPQL, detect_dialect
from csparql.core.language.errors import QueryError, QuerySemanticError
from csparql.core.language.parser import DIALECTS, parse
from csparql.core.language.rspql import parse_rspql


def parse_query(text: str, source_name: str = "<query>", dialect: str | None = None) -> sx.Query:
    """The syntax tree of a query that parses, translates and keeps every C-SPARQL rule; ``dialect`` is
    ``"csparql"``, ``"rspql"`` or None (told from the text)."""
    query, _ = _front_end(text, source_name, dialect)
    return query


def compile_query(text: str, source_name: str = "<query>", dialect: str | None = None) -> QueryPlan:
    """The algebra of a valid query: parsed, checked and translated.

    Args:
        text: The query, in C-SPARQL or RSP-QL.
        source_name: What the messages call the text (a file's name).
        dialect: ``csparql`` or ``rspql``; None reads the dialect the text is written in.

    Returns:
        The query's plan (``csparql.core.algebra.operators.QueryPlan``).

    Raises:
        QueryError: With every problem found, each with its line and column.

    Example:
        ```python
        plan = compile_query(open("examples/queries/04-cars-per-district.rq").read(), "04-cars-per-district.rq")
        plan.registration.name  # 'CarsEnteringCityCenterPerDistrict'
        ```"""
    _, plan = _front_end(text, source_name, dialect)
    return plan


def query_dialect(text: str, dialect: str | None = None) -> str:
    """The dialect a query is read in: ``dialect`` when given (``ValueError`` for an unknown one), else the
    one its text is written in."""
    if dialect is None:
        return detect_dialect(text)
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    return dialect


def _front_end(text: str, source_name: str, dialect: str | None) -> tuple[sx.Query, QueryPlan]:
    if query_dialect(text, dialect) == RSPQL:
        query = parse_rspql(text, source_name)
    else:
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


__all__ = ["CSPARQL", "RSPQL", "compile_query", "parse_query", "query_dialect"]
