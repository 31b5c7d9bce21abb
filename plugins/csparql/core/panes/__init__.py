"""Which queries can compute their sliding windows from panes, and how: pure, like the optimizer.

A logical window ``[RANGE ρ STEP σ]`` (docs/semantics.md, *Logical windows*) ends at every multiple of σ, so with
g = gcd(ρ, σ) each window (t_f − ρ, t_f] is exactly the ρ/g *panes* (kg − g, kg] it covers, and every pane lies
in about ρ/σ windows. When a window's result is a combination of per-pane partial results, each pane is computed
once and every window combines its panes, instead of reading and joining its whole range again.
``pane_plan(plan)`` (``decide.py``) decides this for an optimized ``QueryPlan`` and returns either a ``PanePlan``
(what each pane computes and keeps, and how a window combines its panes) or ``Recompute`` with the reason it
cannot. ``pane_partial_plan`` (``partials.py``) and ``pane_combination_plan`` (``combine.py``) rewrite the query
into what the engine evaluates (``csparql.engine.panes``): the plan that computes the partial results of a run of
panes at once, each row tagged with its pane (``PANE_VAR``), and the plan that combines the stored rows of one
window's panes (``alg.PaneRows``) into the window's result. Both are ordinary algebra, compiled by the one Spark
compiler, so a window combined from panes gets every SPARQL semantic (term order, numeric promotion, errors) from
the same code as a recompute. Settings come in as values: the pane mode of a query or a run (``pane_mode``), and
the engine's minimum window size for ``AUTO`` (``csparql.engine.panes.pane_min_triples``).

Why a query may use panes — the argument, written once:

1. **A window is a set.** Each triple pattern matches the window as an RDF graph: a triple that occurs several
   times in a window (with several timestamps) is one triple (``docs/architecture.md``, "Evaluating a window";
   the compiler's ``_pattern`` keeps distinct matches, ``SourceFrames._window_set`` reads the window as a set).
   So a triple present in two panes of a window counts *once* in the window, not once per pane.

2. **One pane per solution.** Panes are valid only when every solution of the window's pattern is made of at
   most one stream triple match (any number of static triples). Then the window's solutions, as a *set*, are
   the union of its panes' solutions: a solution needs its one stream triple, which lies in some pane of the
   window, and a pane's solution is one of the window's. A join of two stream triple patterns (in a BGP, a
   join, a property path, OPTIONAL or EXISTS) may combine triples of two panes, a solution no single pane has;
   an OPTIONAL, MINUS or NOT EXISTS over a stream depends on the absence of a match in the *whole* window; a
   sub-query's LIMIT, GROUP BY or AGGREGATE clause over the stream reads the whole window. All recompute.
   ``timestamp()`` and ``f:timestamp`` give the latest τ of a triple in the *window* (docs/semantics.md, *The
   timestamp function*): a pane sees its own latest τ, so they recompute; ``NOW()`` is the window's end, not the
   pane's; ``RAND``, ``BNODE``, ``UUID`` and ``STRUUID`` differ between evaluations: all recompute inside the
   per-pane part.

3. **Combinations that respect the set.** From 1 and 2, whatever is a function of the window's solution *set*
   combines from per-pane sets by union: a DISTINCT projection (or REDUCED, evaluated as DISTINCT), an ASK, a
   CONSTRUCT without blank nodes in its template (its output is a graph, a set), COUNT/SUM/AVG(DISTINCT …)
   (per-pane sets of values per group, united), and MIN and MAX (idempotent: the minimum of pane minima is the
   window's, a triple seen in two panes changes nothing). COUNT, SUM and AVG without DISTINCT count the
   window's solutions as a *multiset* built on the set of stream triples: adding per-pane counts would count a
   triple present in two panes twice. They combine exactly only through *keyed* partials: each pane keeps, per
   group and per stream solution (the stream triple pattern the solution comes from and the values of its
   variables), the count and sum of the solutions that stream solution gives; a window unites its panes' keyed
   rows, keeps each key once — the contribution of a key depends on the key and the static graphs only, so it
   is the same in every pane — and adds them. That needs every solution to come from exactly one stream
   triple (no solution from static graphs alone, which would repeat in every pane) and the stream pattern's
   variables visible where the aggregate is computed (no sub-select over the stream). SAMPLE (any value: a
   pane could pick another than a recompute) and GROUP_CONCAT (order and multiplicity) recompute.

4. **What the windows are.** ``ISTREAM``/``DSTREAM`` compare two windows, count windows (``TRIPLES n``) end
   at a triple, not a pane boundary, and a query whose windows are all tumbling has every triple in one window:
   nothing to reuse. AGGREGATE clauses that stay (not reduced to a GROUP BY by the optimizer) extend every
   solution of the window with its group's aggregate, so their output is per solution, not per group. A
   SELECT without DISTINCT or aggregate returns the window's multiset of solutions: nothing is combined.

5. **What is stored.** Each pane keeps *solutions*, not finished aggregates, reduced to what the operators above
   need: the distinct projections onto the variables the combination reads (DISTINCT, ASK, CONSTRUCT, and
   aggregates that are functions of a set: MIN, MAX, DISTINCT aggregates), so a window's result is those
   operators over the union of its panes' sets — errors in a MIN's argument, numeric promotion of a SUM of
   DISTINCT values and ORDER BY are evaluated on the window's solutions exactly as a recompute does. With COUNT,
   SUM or AVG without DISTINCT a pane keeps each distinct solution (every in-scope variable, and which stream
   pattern matched) with its number of occurrences ``.n`` in the pane; a window keeps each such row once
   (the same stream solution gives the same rows in every pane) and weighs it: COUNT(*) is the sum of ``.n``,
   SUM(e) the sum of e × ``.n``, AVG their quotient.

Entailment recomputes: the engine infers entailed triples per evaluation. GROUP BY keys, HAVING and
expressions above the aggregation are computed on the combined values, as in a recompute.

The decision is made on the optimized plan, whose split of patterns into stream and static parts follows the
warehouse statistics; without statistics every pattern may read the stream, and a query joining several
patterns recomputes. A pane cache must be keyed by the plan it was computed for.
"""

import importlib

from csparql.core.panes.modes import ALWAYS, AUTO, OFF, PANE_MODES, pane_mode

_LAZY = {
    "pane_combination_plan": "combine",
    **dict.fromkeys(["AGGREGATE", "ASK", "CONSTRUCT", "DISTINCT", "KEYED", "MAXIMUM", "MINIMUM", "VALUE_SET",
                     "PaneDecision", "PanePlan", "PaneWindow", "PartialAggregate", "Recompute",
                     "automatic_refusal", "pane_plan"], "decide"),
    **dict.fromkeys(["COUNT_VAR", "PANE_VAR", "PATTERN_VAR", "PartialPlan", "pane_partial_plan"], "partials"),
}
"""The names loaded with the pane algebra on first use (PEP 562): the modes alone load nothing else, so that
what only reads a query's pane mode (an Airflow DAG file) does not load the algebra."""


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


__all__ = ["AUTO", "ALWAYS", "OFF", "PANE_MODES", "pane_mode", *_LAZY]
