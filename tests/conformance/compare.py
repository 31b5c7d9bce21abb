"""Comparing two query results: what the engine returned and what the independent evaluator (or a W3C
expected-results file) says.

- SELECT: the projected variables must be the same (in the same order, unless the query says ``SELECT *``,
  whose column order is the evaluator's choice), and the rows the same multiset. Terms compare as RDF terms,
  except that numbers compare by value within the same datatype (integers exactly; decimals and doubles with a
  relative tolerance of 1e-9, floats 1e-5, since implementations round divisions differently and some add
  xsd:float values in single precision, whose rounding errors add up over a sum), booleans and
  date-times by value, language tags case-insensitively, and a plain literal is an xsd:string (RDF 1.1).
- Blank nodes compare up to one consistent renaming over the whole result (a bijection between the labels of
  the two sides), found by backtracking.
- ORDER BY: when the query orders by projected variables, the engine's row order must agree with the keys
  (``check_order``); ties may come in any order.
- ASK: the booleans. CONSTRUCT/DESCRIBE: the graphs must be isomorphic (``rdflib.compare.isomorphic``) once
  number, boolean and date-time literals are written canonically.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal

from rdflib import BNode, Graph, Literal, URIRef
from rdflib.compare import isomorphic

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
INTEGER_TYPES = {
    XSD + name
    for name in (
        "integer nonPositiveInteger negativeInteger long int short byte nonNegativeInteger unsignedLong "
        "unsignedInt unsignedShort unsignedByte positiveInteger"
    ).split()
}
TOLERANCE = {XSD + "decimal": 1e-9, XSD + "double": 1e-9, XSD + "float": 1e-5}
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_DECIMAL = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$")
_DOUBLE = re.compile(r"^[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|INF)$|^NaN$")
_DATETIME = re.compile(r"^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")


@dataclass
class Results:
    """A result in a form both sides can produce: rows of rdflib terms (None = unbound), a boolean, or triples."""

    form: str  # "select", "ask", "construct" or "describe"
    vars: tuple[str, ...] = ()
    rows: list[tuple] = field(default_factory=list)
    boolean: bool | None = None
    triples: list[tuple] = field(default_factory=list)

    def describe(self, limit: int = 12) -> str:
        if self.form == "ask":
            return f"ASK {self.boolean}"
        if self.form == "select":
            lines = [" ".join("?" + v for v in self.vars) + f"   ({len(self.rows)} rows)"]
            for row in sorted(self.rows, key=lambda r: [_sort_text(t) for t in r])[:limit]:
                lines.append("  " + " | ".join(_show(t) for t in row))
            if len(self.rows) > limit:
                lines.append(f"  … {len(self.rows) - limit} more")
            return "\n".join(lines)
        lines = [f"{self.form.upper()} ({len(self.triples)} triples)"]
        for triple in sorted(self.triples, key=lambda t: [_sort_text(x) for x in t])[:limit]:
            lines.append("  " + " ".join(_show(t) for t in triple))
        return "\n".join(lines)


def from_engine(result) -> Results:
    """The engine's ``QueryResult`` as ``Results``."""
    if result.form == "select":
        return Results("select", tuple(str(v) for v in result.vars), [tuple(r) for r in result.rows])
    if result.form == "ask":
        return Results("ask", boolean=bool(result.boolean))
    return Results(result.form, triples=[tuple(t) for t in result.triples])


# --- terms -------------------------------------------------------------------------------------------------


def literal_parts(term: Literal) -> tuple[str, str, str | None]:
    """(lexical form, datatype IRI, language) of a literal, plain literals read as xsd:string."""
    if term.language:
        return str(term), RDF_LANGSTRING, term.language.lower()
    return str(term), str(term.datatype) if term.datatype is not None else XSD_STRING, None


def _number(lexical: str, datatype: str):
    if datatype in INTEGER_TYPES:
        return int(lexical) if _INTEGER.match(lexical) else None
    if datatype == XSD + "decimal":
        return Decimal(lexical) if _DECIMAL.match(lexical) else None
    if datatype in (XSD + "double", XSD + "float"):
        if not _DOUBLE.match(lexical):
            return None
        return float(lexical.replace("INF", "inf"))
    return None


def _instant(lexical: str):
    if not _DATETIME.match(lexical):
        return None
    text = lexical.replace("Z", "+00:00")
    match = re.match(r"^(-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(.*)$", text)
    base, fraction, zone = match.groups()
    try:
        value = datetime.fromisoformat(base + (zone or ""))
    except ValueError:
        return None
    micros = Decimal(fraction or "0")
    if value.tzinfo is None:
        return ("local", value.replace(tzinfo=timezone.utc).timestamp() + float(micros))
    return ("zoned", value.timestamp() + float(micros))


def canonical(term):
    """A hashable key for a term under which equal terms (as this module defines it) are equal, numbers
    aside (they are compared with a tolerance by ``same_term``)."""
    if term is None:
        return ("unbound",)
    if isinstance(term, URIRef):
        return ("iri", str(term))
    if isinstance(term, BNode):
        return ("bnode", str(term))
    lexical, datatype, language = literal_parts(term)
    if language is not None:
        return ("lang", lexical, language)
    if datatype == XSD_STRING:
        return ("str", lexical)
    number = _number(lexical, datatype)
    if number is not None:
        if isinstance(number, Decimal):
            number = number.normalize()
        return ("num", datatype, number)
    if datatype == XSD + "boolean" and lexical in ("true", "false", "1", "0"):
        return ("bool", lexical in ("true", "1"))
    if datatype == XSD + "dateTime":
        instant = _instant(lexical)
        if instant is not None:
            return ("datetime", instant)
    return ("lit", lexical, datatype)


def same_term(a, b) -> bool:
    """Whether two non-blank terms are equal as this module defines it."""
    ka, kb = canonical(a), canonical(b)
    if ka == kb:
        return True
    if ka[0] == kb[0] == "num" and ka[1] == kb[1]:
        x, y = ka[2], kb[2]
        tolerance = TOLERANCE.get(ka[1])
        if tolerance is None:
            return False
        x, y = float(x), float(y)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        if math.isinf(x) or math.isinf(y):
            return x == y
        return abs(x - y) <= tolerance * max(abs(x), abs(y), 1e-300)
    if ka[0] == kb[0] == "datetime":
        return abs(ka[1][1] - kb[1][1]) < 1e-6 and ka[1][0] == kb[1][0]
    return False


def _show(term) -> str:
    if term is None:
        return "UNDEF"
    if isinstance(term, BNode):
        return f"_:{term}"
    if isinstance(term, URIRef):
        return f"<{term}>"
    lexical, datatype, language = literal_parts(term)
    if language:
        return f'"{lexical}"@{language}'
    if datatype == XSD_STRING:
        return f'"{lexical}"'
    return f'"{lexical}"^^<{datatype}>'


def _sort_text(term) -> str:
    return "" if term is None else _show(term)


# --- rows --------------------------------------------------------------------------------------------------


def _blank_free(row) -> tuple:
    """The row with blank nodes replaced by a marker (rows that can match have equal keys, numbers aside)."""
    return tuple("_:" if isinstance(t, BNode) else _rough(canonical(t)) for t in row)


def _rough(key):
    """A coarse version of a canonical key: numbers of inexact types only keep their datatype, so that rows
    that are equal within the tolerance land in the same bucket."""
    if key[0] == "num" and key[1] in TOLERANCE:
        return ("num", key[1])
    if key[0] == "datetime":
        return ("datetime", key[1][0])
    return key


def _row_matches(a, b, mapping: dict, reverse: dict) -> dict | None:
    """Extend the blank node bijection so that row a equals row b, or None when they cannot be equal."""
    added = {}
    for x, y in zip(a, b):
        if isinstance(x, BNode) or isinstance(y, BNode):
            if not (isinstance(x, BNode) and isinstance(y, BNode)):
                return None
            mapped = mapping.get(x, added.get(x))
            if mapped is None:
                if y in reverse or y in added.values():
                    return None
                added[x] = y
            elif mapped != y:
                return None
        elif not same_term(x, y):
            return None
    return added


def match_multisets(left: list[tuple], right: list[tuple]) -> bool:
    """Whether two lists of rows are the same multiset, up to a consistent renaming of blank nodes."""
    if len(left) != len(right):
        return False
    if Counter(_blank_free(r) for r in left) != Counter(_blank_free(r) for r in right):
        return False
    has_blanks = any(isinstance(t, BNode) for row in left + right for t in row)
    exact = not has_blanks and all(k[0] != "num" or k[1] not in TOLERANCE for row in left for k in map(canonical, row))
    if exact and Counter(tuple(map(canonical, r)) for r in left) == Counter(tuple(map(canonical, r)) for r in right):
        return True
    # Bucket by the blank-free key, then match inside buckets (backtracking over blank-node bijections).
    buckets: dict = {}
    for index, row in enumerate(right):
        buckets.setdefault(_blank_free(row), []).append(index)
    order = sorted(range(len(left)), key=lambda i: (sum(isinstance(t, BNode) for t in left[i]), len(buckets[_blank_free(left[i])])))
    used = [False] * len(right)

    def search(position: int, mapping: dict, reverse: dict) -> bool:
        if position == len(order):
            return True
        row = left[order[position]]
        tried = set()
        for j in buckets[_blank_free(row)]:
            if used[j]:
                continue
            if not has_blanks:
                # equal rows are interchangeable: a choice that failed fails again with an equal row
                key = tuple(map(canonical, right[j]))
                if key in tried:
                    continue
                tried.add(key)
            added = _row_matches(row, right[j], mapping, reverse)
            if added is None:
                continue
            used[j] = True
            mapping.update(added)
            reverse.update({v: k for k, v in added.items()})
            if search(position + 1, mapping, reverse):
                return True
            used[j] = False
            for k, v in added.items():
                del mapping[k]
                del reverse[v]
        return False

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(left) + 1000))
    try:
        return search(0, {}, {})
    finally:
        sys.setrecursionlimit(limit)


def difference(actual: list[tuple], expected: list[tuple], names) -> str:
    """The rows only the engine returned and the rows only expected (blank nodes and numbers compared
    roughly), for a readable report."""
    keys_a = Counter(_blank_free(r) for r in actual)
    keys_e = Counter(_blank_free(r) for r in expected)
    only_a = keys_a - keys_e
    only_e = keys_e - keys_a
    lines = [" ".join("?" + n for n in names) + f"   (engine {len(actual)} rows, expected {len(expected)})"]
    shown_a = [r for r in actual if only_a.get(_blank_free(r), 0) > 0]
    shown_e = [r for r in expected if only_e.get(_blank_free(r), 0) > 0]
    for label, rows in (("engine only", shown_a), ("expected only", shown_e)):
        lines.append(f"{label}: {len(rows)}")
        for row in rows[:10]:
            lines.append("  " + _row_text(row))
    if not shown_a and not shown_e:
        lines.append("(same rows up to blank nodes and rounding; the blank nodes or numbers do not match)")
        lines.append(Results("select", tuple(names), actual).describe())
        lines.append(Results("select", tuple(names), expected).describe())
    return "\n".join(lines)


# --- graphs ------------------------------------------------------------------------------------------------


def _canonical_literal(term):
    if not isinstance(term, Literal):
        return term
    lexical, datatype, language = literal_parts(term)
    if language:
        return Literal(lexical, lang=language)
    if datatype == XSD_STRING:
        return Literal(lexical)
    key = canonical(term)
    if key[0] == "num":
        value = key[2]
        if isinstance(value, float):
            text = "NaN" if math.isnan(value) else ("INF" if value == math.inf else "-INF" if value == -math.inf else f"{value:.9e}")
        else:
            text = str(value) if isinstance(value, int) else format(value, "f")
        return Literal(text, datatype=URIRef(datatype), normalize=False)
    if key[0] == "bool":
        return Literal("true" if key[1] else "false", datatype=URIRef(datatype), normalize=False)
    return Literal(lexical, datatype=URIRef(datatype), normalize=False)


def graph_of(triples) -> Graph:
    graph = Graph()
    for s, p, o in triples:
        graph.add((s, p, _canonical_literal(o)))
    return graph


# --- the comparison ---------------------------------------------------------------------------------------


def compare(actual: Results, expected: Results, ordered_by: list[tuple[str, bool]] | None = None, any_var_order: bool = False) -> list[str]:
    """The differences between the engine's result and the expected one (empty when they agree).

    ``ordered_by``: the query's ORDER BY keys as (projected variable, descending), when every key is one;
    ``any_var_order``: the projection order is free (``SELECT *``)."""
    if actual.form != expected.form:
        return [f"result form {actual.form} but expected {expected.form}"]
    if actual.form == "ask":
        return [] if actual.boolean == expected.boolean else [f"ASK gave {actual.boolean}, expected {expected.boolean}"]
    if actual.form in ("construct", "describe"):
        if isomorphic(graph_of(actual.triples), graph_of(expected.triples)):
            return []
        return [f"graphs differ\nengine:\n{actual.describe()}\nexpected:\n{expected.describe()}"]
    problems = []
    if any_var_order:
        if set(actual.vars) != set(expected.vars):
            return [f"variables {actual.vars} but expected {expected.vars}"]
        positions = [actual.vars.index(v) for v in expected.vars]
        rows = [tuple(row[i] for i in positions) for row in actual.rows]
    else:
        if tuple(actual.vars) != tuple(expected.vars):
            return [f"variables {actual.vars} but expected {expected.vars}"]
        rows = actual.rows
    if not match_multisets(list(rows), list(expected.rows)):
        problems.append("rows differ\n" + difference(list(rows), list(expected.rows), expected.vars))
    if ordered_by:
        problem = check_order(actual, ordered_by)
        if problem:
            problems.append(problem)
    return problems


# --- ORDER BY ---------------------------------------------------------------------------------------------


def order_category(term):
    """(rank, comparable value) under SPARQL's ORDER BY (§15.1) where it is defined, else None: unbound <
    blank nodes < IRIs < literals; among literals only same-kind values compare (numbers, strings, booleans,
    date-times)."""
    if term is None:
        return (0, None)
    if isinstance(term, BNode):
        return (1, None)
    if isinstance(term, URIRef):
        return (2, str(term))
    key = canonical(term)
    if key[0] == "num":
        return (3, "num", float(key[2]))
    if key[0] == "str":
        return (3, "str", key[1])
    if key[0] == "bool":
        return (3, "bool", key[1])
    if key[0] == "datetime":
        return (3, "datetime", key[1][1])
    return (3, "other", None)


def _compare_keys(a, b) -> int | None:
    """-1, 0, 1 when the order of a and b is defined; None when SPARQL leaves it to the implementation."""
    ca, cb = order_category(a), order_category(b)
    if ca[0] != cb[0]:
        return -1 if ca[0] < cb[0] else 1
    if ca[0] in (0,):
        return 0
    if ca[0] == 1:
        return None if a != b else 0
    if ca[0] == 2:
        return (ca[1] > cb[1]) - (ca[1] < cb[1])
    if ca[1] != cb[1] or ca[1] == "other":
        return None if a != b else 0
    x, y = ca[2], cb[2]
    if isinstance(x, float) and (math.isnan(x) or math.isnan(y)):
        return None
    if ca[1] == "num" and same_term(a, b):
        return 0
    return (x > y) - (x < y)


def check_order(result: Results, ordered_by: list[tuple[str, bool]]) -> str | None:
    """A problem when two consecutive rows of the engine's result are out of the ORDER BY order."""
    positions = [(result.vars.index(var), descending) for var, descending in ordered_by]
    for index in range(len(result.rows) - 1):
        a, b = result.rows[index], result.rows[index + 1]
        for position, descending in positions:
            outcome = _compare_keys(a[position], b[position])
            if outcome is None:
                break  # the order of these two is the implementation's choice
            if descending:
                outcome = -outcome
            if outcome < 0:
                break
            if outcome > 0:
                return f"rows {index} and {index + 1} are out of ORDER BY order: {_row_text(a)} before {_row_text(b)}"
    return None


def _row_text(row) -> str:
    return " | ".join(_show(t) for t in row)

