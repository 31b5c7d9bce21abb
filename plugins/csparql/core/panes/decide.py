"""Whether a query's sliding windows can be computed from panes, and how: ``pane_plan`` gives a ``PanePlan``
or ``Recompute`` with the reason (the argument is in ``csparql.core.panes``), and why ``AUTO`` recomputes a
query that could (the pane modes a query or a run asks for are ``csparql.core.panes.modes``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdflib import BNode, URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.algebra.sexpr import format_expression, format_operator
from csparql.core.algebra.walk import expressions_of, walk
from csparql.core.language import expressions as ex
from csparql.core.windows import LogicalWindow, PhysicalWindow, format_duration

XSD_NAMESPACE = "http://www.w3.org/2001/XMLSchema#"

# How a pane keeps a partial aggregate and how a window combines them.
MINIMUM = "minimum"            # the pane's minimum per group; the window's is the least of them
MAXIMUM = "maximum"            # the pane's maximum per group; the window's is the greatest of them
VALUE_SET = "value set"        # the pane's distinct values per group; the window aggregates their union
KEYED = "keyed"                # per group and stream solution, the count/sum it gives; each key counted once

# Combination of the whole output.
AGGREGATE, DISTINCT, ASK, CONSTRUCT = "aggregate", "distinct", "ask", "construct"

NONDETERMINISTIC = ("RAND", "BNODE", "UUID", "STRUUID")


@dataclass(frozen=True)
class PaneWindow:
    """The panes of one sliding stream window: each window of ``range`` is ``range // pane`` panes of ``pane``
    (µs), aligned to multiples of ``pane`` from the epoch."""

    stream: URIRef
    range: int
    step: int

    @property
    def pane(self) -> int:
        return math.gcd(self.range, self.step)

    @property
    def panes_per_window(self) -> int:
        return self.range // self.pane

    def describe(self) -> str:
        return (f"<{self.stream}> [RANGE {format_duration(self.range)} STEP {format_duration(self.step)}]: panes of "
                f"{format_duration(self.pane)}, {self.panes_per_window} per window")


@dataclass(frozen=True)
class PartialAggregate:
    """One aggregate of the output: the call, the variable it binds and how panes keep it (``MINIMUM``,
    ``MAXIMUM``, ``VALUE_SET`` or ``KEYED``)."""

    var: Variable
    call: ex.AggregateCall
    partial: str

    def describe(self, prefixes: dict[str, str]) -> str:
        call = format_expression(self.call, prefixes)
        kept = {
            MINIMUM: "each pane keeps its solutions' distinct values per group; the window takes the least of their union",
            MAXIMUM: "each pane keeps its solutions' distinct values per group; the window takes the greatest of "
                     "their union",
            VALUE_SET: "each pane keeps its distinct values per group; the window aggregates their union",
            KEYED: "each pane keeps each distinct solution with its number of occurrences; the window keeps each "
                   "solution of a stream triple once and weighs it by that number",
        }[self.partial]
        return f"{self.var.n3()} = {call}: {kept}"


@dataclass(frozen=True)
class PanePlan:
    """How a query's windows are computed from panes.

    ``pattern`` is what each pane evaluates (over its panes of the stream windows and the static graphs);
    ``combination`` how a window combines its panes' results: ``AGGREGATE`` (``keys`` and ``partials``; the
    operators above the aggregation — HAVING, SELECT expressions, ORDER BY, LIMIT — run on the combined
    groups), ``DISTINCT`` (the union of per-pane sets of projected solutions), ``ASK`` (whether any pane has a
    solution) or ``CONSTRUCT`` (the union of per-pane constructed triples). ``stream_patterns`` are the stream
    triple patterns whose bindings key the solutions of ``KEYED`` partials (empty when none is keyed)."""

    windows: tuple[PaneWindow, ...]
    combination: str
    pattern: alg.Operator
    keys: tuple[alg.GroupKey, ...] = ()
    partials: tuple[PartialAggregate, ...] = ()
    stream_patterns: tuple[alg.TriplePattern, ...] = ()

    @property
    def keyed(self) -> bool:
        return any(partial.partial == KEYED for partial in self.partials)

    def describe(self, prefixes: dict[str, str] | None = None) -> list[str]:
        """The plan as lines of text (``csparql explain``)."""
        prefixes = prefixes or {}
        lines = [f"windows from panes: {window.describe()}" for window in self.windows]
        if self.combination == AGGREGATE:
            keys = " ".join(format_expression(key.expression, prefixes) for key in self.keys) or "(none: one group)"
            lines.append(f"each pane aggregates its solutions by group, keys {keys}")
            lines.extend(f"  {partial.describe(prefixes)}" for partial in self.partials)
            if self.keyed:
                patterns = " ".join(format_operator(alg.BGP((triple,)), prefixes).strip()
                                    for triple in self.stream_patterns)
                lines.append(f"  a stream solution is keyed by its pattern among {patterns} and the values of its "
                             "variables (and its graph inside GRAPH ?g)")
        elif self.combination == DISTINCT:
            lines.append("each pane keeps its distinct projected solutions; a window keeps their union, each once")
        elif self.combination == ASK:
            lines.append("each pane keeps whether it has a solution; a window is true when any of its panes is")
        else:
            lines.append("each pane keeps the triples it constructs; a window keeps their union, each once")
        return lines


@dataclass(frozen=True)
class Recompute:
    """A query whose every window is computed from its whole range, and why."""

    reason: str

    def describe(self) -> list[str]:
        return [f"recomputes every window: {self.reason}"]


PaneDecision = PanePlan | Recompute


class _NotDecomposable(Exception):
    """Raised inside the analysis with the reason a query recomputes."""


def pane_plan(plan: alg.QueryPlan) -> PaneDecision:
    """The pane plan of an optimized query (``csparql.core.optimizer.optimize``), or ``Recompute`` with the reason
    its windows cannot be combined from panes (the module docstring gives the argument)."""
    try:
        return _decide(plan)
    except _NotDecomposable as refusal:
        return Recompute(str(refusal))


def _decide(plan: alg.QueryPlan) -> PanePlan:
    if plan.stream_operator != alg.RSTREAM:
        raise _NotDecomposable(f"{plan.stream_operator} compares each window's result with the previous "
                               "window's, which panes do not give")
    decision = _decide_shape(plan)
    if plan.entailment:
        raise _NotDecomposable(f"it is evaluated under entailment ({', '.join(plan.entailment)}), which the engine "
                               "infers per evaluation of a window, not per pane")
    return decision


def _decide_shape(plan: alg.QueryPlan) -> PanePlan:
    windows = _pane_windows(plan)
    for node in walk(plan.pattern):
        for expression in expressions_of(node):
            if any(isinstance(e, (ex.Timestamp, ex.TripleTimestamp)) for e in ex.walk(expression)):
                raise _NotDecomposable("it uses timestamp(): the latest timestamp of a triple in the window is "
                                       "not the one in each pane")
    if isinstance(plan.form, alg.DescribeResult):
        raise _NotDecomposable("DESCRIBE follows the triples of each described resource through the whole "
                               "window, across panes")
    if isinstance(plan.form, alg.ConstructResult):
        if any(isinstance(term, BNode) or (isinstance(term, Variable) and term.startswith("_:"))
               for triple in plan.form.template for term in (triple.subject, triple.predicate, triple.object)):
            raise _NotDecomposable("the CONSTRUCT template has blank nodes, fresh for every solution of the "
                                   "window: per-pane triples would not be the window's")
        _check(plan.pattern, keyed=False)
        return PanePlan(windows, CONSTRUCT, plan.pattern)
    if isinstance(plan.form, alg.AskResult):
        _check(plan.pattern, keyed=False)
        return PanePlan(windows, ASK, plan.pattern)

    top = below_top(plan.pattern, keep_aggregate=True)
    if isinstance(top, alg.Group):
        return _aggregate_plan(windows, top)
    distinct = _first_distinct(plan.pattern)
    if distinct is None:
        if isinstance(top, alg.StreamAggregate):
            raise _NotDecomposable("an AGGREGATE clause keeps every solution of the window, extended with its "
                                   "group's aggregate: the output is per solution, not per group (SELECT DISTINCT "
                                   "of the group variables and COUNTs is reduced to a GROUP BY, which can)")
        raise _NotDecomposable("the output is every solution of the window (no aggregate, no DISTINCT): a "
                               "multiset with nothing to combine")
    _check(distinct.input, keyed=False)
    return PanePlan(windows, DISTINCT, distinct.input)


def _pane_windows(plan: alg.QueryPlan) -> tuple[PaneWindow, ...]:
    read = _streams_read(plan.pattern)
    if not plan.streams:
        raise _NotDecomposable("the query reads no stream window: there is nothing to slide")
    if not read:
        raise _NotDecomposable("no pattern reads a stream window: every window gives the same solutions")
    windows = []
    for stream in read:
        if isinstance(stream.window, PhysicalWindow):
            raise _NotDecomposable(f"<{stream.iri}> has a count window [{stream.window}]: it ends at a triple, "
                                   "not at a pane boundary")
        window: LogicalWindow = stream.window
        windows.append(PaneWindow(stream.iri, window.range, window.step))
    if all(window.range == window.step for window in windows):
        raise _NotDecomposable("tumbling: every triple is in one window, nothing to reuse")
    if len({(window.range, window.step) for window in windows}) > 1:
        shapes = "; ".join(window.describe() for window in windows)
        raise _NotDecomposable(f"its stream windows differ ({shapes}): panes combine windows of one shape")
    return tuple(windows)


def _streams_read(op: alg.Operator) -> tuple[alg.StreamWindow, ...]:
    found: dict[alg.StreamWindow, None] = {}
    for node in walk(op):
        if isinstance(node, (alg.BGP, alg.PathPattern)):
            for source in node.sources or ():
                if isinstance(source, alg.StreamWindow):
                    found[source] = None
    return tuple(found)


def below_top(op: alg.Operator, keep_aggregate: bool) -> alg.Operator:
    """The operator below the query's top operators (LIMIT, ORDER BY, projection, DISTINCT, and, above an
    aggregation, HAVING and SELECT expressions): the Group when ``keep_aggregate`` and one is reached."""
    while True:
        if isinstance(op, (alg.Slice, alg.OrderBy, alg.Project, alg.Distinct, alg.Reduced)):
            op = op.input
        elif keep_aggregate and isinstance(op, (alg.Extend, alg.Filter)) and _reaches_group(op):
            _check_expression(op.expression, "an expression over the aggregates", combined=True)
            op = op.input
        else:
            return op


def _reaches_group(op: alg.Operator) -> bool:
    while isinstance(op, (alg.Extend, alg.Filter)):
        op = op.input
    return isinstance(op, alg.Group)


def _first_distinct(op: alg.Operator) -> alg.Distinct | alg.Reduced | None:
    while isinstance(op, (alg.Slice, alg.OrderBy, alg.Project)):
        op = op.input
    return op if isinstance(op, (alg.Distinct, alg.Reduced)) else None


def _aggregate_plan(windows: tuple[PaneWindow, ...], group: alg.Group) -> PanePlan:
    for key in group.keys:
        _check_expression(key.expression, "a GROUP BY key")
    partials = tuple(_partial(var, call) for var, call in group.aggregates)
    keyed = any(partial.partial == KEYED for partial in partials)
    _check(group.input, keyed=keyed)
    stream_patterns = _stream_patterns(group.input) if keyed else ()
    return PanePlan(windows, AGGREGATE, group.input, group.keys, partials, stream_patterns)


def _partial(var: Variable, call: ex.Expr) -> PartialAggregate:
    if not isinstance(call, ex.AggregateCall):
        raise _NotDecomposable("an aggregate is not a plain aggregate call")
    if call.argument is not None:
        _check_expression(call.argument, f"the argument of {call.name}")
    if call.name in ("MIN", "MAX"):
        return PartialAggregate(var, call, MINIMUM if call.name == "MIN" else MAXIMUM)
    if call.name in ("COUNT", "SUM", "AVG"):
        return PartialAggregate(var, call, VALUE_SET if call.distinct else KEYED)
    if call.name == "SAMPLE":
        raise _NotDecomposable("SAMPLE may take any value of the window: a pane could pick another than a "
                               "recompute")
    raise _NotDecomposable(f"{call.name} depends on the order and number of the window's values")


def _stream_patterns(op: alg.Operator) -> tuple[alg.TriplePattern, ...]:
    found = []
    for node in walk(op):
        if isinstance(node, alg.BGP) and reads_stream(node):
            found.extend(node.triples)
    return tuple(found)


def reads_stream(op: alg.Operator) -> bool:
    """Whether a pattern of ``op`` reads a stream window."""
    return bool(_streams_read(op))


def _check(op: alg.Operator, keyed: bool) -> None:
    """Raise ``_NotDecomposable`` unless every solution of ``op`` comes from at most one stream triple match
    (exactly one when ``keyed``) and its per-pane solutions are the window's (module docstring, point 2)."""
    least, _ = _stream_matches(op, keyed)
    if keyed and least == 0:
        raise _NotDecomposable("COUNT, SUM and AVG (without DISTINCT) combine per-pane partials keyed by each "
                               "solution's stream triple, but some solutions read only static graphs (they "
                               "would repeat in every pane); COUNT(DISTINCT …), MIN and MAX would not need it")


def _stream_matches(op: alg.Operator, keyed: bool) -> tuple[int, int]:
    """The least and the greatest number of stream triple matches one solution of ``op`` is made of."""
    for expression in expressions_of(op):
        if not isinstance(op, alg.Group):
            _check_expression(expression, "an expression")
    match op:
        case alg.BGP(triples, sources):
            if not any(isinstance(s, alg.StreamWindow) for s in sources or ()):
                return 0, 0
            if len(triples) > 1:
                raise _NotDecomposable(f"it joins {len(triples)} triple patterns over a stream window "
                                       f"({_patterns_text(triples)}): one window may combine triples of "
                                       "different panes")
            return (1, 1) if triples else (0, 0)
        case alg.PathPattern(sources=sources):
            if any(isinstance(s, alg.StreamWindow) for s in sources or ()):
                raise _NotDecomposable("a property path over a stream window may chain triples of different "
                                       "panes")
            return 0, 0
        case alg.Table():
            return 0, 0
        case alg.Join(left, right):
            left_least, left_most = _stream_matches(left, keyed)
            right_least, right_most = _stream_matches(right, keyed)
            if left_most + right_most > 1:
                raise _NotDecomposable("it joins two patterns over stream windows: one window may combine "
                                       "triples of different panes")
            return left_least + right_least, left_most + right_most
        case alg.LeftJoin(left, right, _):
            if reads_stream(right):
                raise _NotDecomposable("an OPTIONAL reads a stream window: whether a solution has a match "
                                       "depends on the whole window, not on one pane")
            return _stream_matches(left, keyed)
        case alg.Minus(left, right):
            if reads_stream(right):
                raise _NotDecomposable("a MINUS removes what a stream window matches: that depends on the "
                                       "whole window, not on one pane")
            return _stream_matches(left, keyed)
        case alg.Union(left, right):
            left_least, left_most = _stream_matches(left, keyed)
            right_least, right_most = _stream_matches(right, keyed)
            return min(left_least, right_least), max(left_most, right_most)
        case alg.Filter(_, inner) | alg.Extend(inner, _, _) | alg.Graph(_, inner):
            return _stream_matches(inner, keyed)
        case alg.OrderBy(inner, _):
            return _stream_matches(inner, keyed)
        case alg.Project(inner, _) | alg.Distinct(inner) | alg.Reduced(inner):
            if keyed and reads_stream(inner):
                raise _NotDecomposable("a sub-select over a stream window hides or merges the stream triples "
                                       "that COUNT, SUM and AVG partials are keyed by")
            return _stream_matches(inner, keyed)
        case alg.Slice(inner, _, _):
            if reads_stream(inner):
                raise _NotDecomposable("a LIMIT or OFFSET inside the query picks solutions among the whole "
                                       "window")
            return 0, 0
        case alg.Group(inner, _, _):
            if reads_stream(inner):
                raise _NotDecomposable("a sub-select's aggregate groups solutions of the whole window")
            return 0, 0
        case alg.StreamAggregate(inner, _):
            if reads_stream(inner):
                raise _NotDecomposable("an AGGREGATE clause extends every solution with its group's aggregate "
                                       "over the whole window (only SELECT DISTINCT of the group variables and "
                                       "COUNTs without FILTER becomes a GROUP BY, which panes can combine)")
            return 0, 0
    raise _NotDecomposable(f"the pane analysis does not know the operator {type(op).__name__}")


def _check_expression(expression: ex.Expr, where: str, combined: bool = False) -> None:
    """Raise ``_NotDecomposable`` if the expression's value in a pane may differ from its value in the window;
    ``combined``: it is computed on a window's combined values, where only EXISTS over a stream matters."""
    for node in ex.walk(expression):
        if combined and not isinstance(node, ex.Exists):
            continue
        match node:
            case ex.Timestamp() | ex.TripleTimestamp():
                raise _NotDecomposable(f"{where} uses timestamp(): the latest timestamp of a triple in the window "
                                       "is not the one in each pane")
            case ex.BuiltinCall("NOW", _):
                raise _NotDecomposable(f"{where} uses NOW(), the window's end, which a pane does not know")
            case ex.BuiltinCall(name, _) if name in NONDETERMINISTIC:
                raise _NotDecomposable(f"{where} uses {name}(), which gives another value at every evaluation")
            case ex.FunctionCall(iri, _, _) if not str(iri).startswith(XSD_NAMESPACE):
                raise _NotDecomposable(f"{where} calls the extension function <{iri}>, not known to be "
                                       "deterministic")
            case ex.Exists(pattern, negated) if isinstance(pattern, alg.Operator) and reads_stream(pattern):
                word = "NOT EXISTS" if negated else "EXISTS"
                raise _NotDecomposable(f"{where} has {word} over a stream window, which looks at the whole "
                                       "window, not at one pane")


def _patterns_text(triples: tuple[alg.TriplePattern, ...]) -> str:
    def term(value) -> str:
        return value.n3() if isinstance(value, (URIRef, Variable)) else str(value)

    return "; ".join(f"{term(t.subject)} {term(t.predicate)} {term(t.object)}" for t in triples)



# --- when the engine uses them -----------------------------------------------------------------------------

def automatic_refusal(decision: PanePlan) -> str | None:
    """Why ``AUTO`` recomputes a query whose windows could combine from panes (None: it does not)."""
    if decision.keyed:
        return ("its COUNT, SUM or AVG without DISTINCT keep a row per stream solution in every pane, so "
                "combining a window reads as many rows as recomputing it (docs/performance/panes.md); "
                "'# csparql panes always' uses panes anyway")
    return None


def the_group(op: alg.Operator) -> alg.Group:
    """The query's aggregation (the one ``pane_plan`` combines)."""
    group = below_top(op, keep_aggregate=True)
    if not isinstance(group, alg.Group):
        raise ValueError("the plan's panes are not combined by aggregation")
    return group
