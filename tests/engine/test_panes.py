"""Windows computed from panes against full recompute and the independent evaluator, window by window.

A seeded random test over real Delta tables and the shared SparkSession: each case draws a sliding window
(RANGE/STEP from 2 to 30, RANGE not always a multiple of STEP, so the pane is their gcd), a pane-decomposable
query shape (checked with ``pane_plan``, so the test cannot silently test recompute only) and data with
duplicates, out-of-order commits, timestamps on pane and window boundaries, empty panes and empty windows.
Its windows are evaluated in time order, as a live schedule does (later windows reuse the panes of earlier
ones), each by panes, by recompute (``panes=OFF``) and by ``conformance.reference``; then late triples land
in panes of windows already evaluated (and beyond), a static graph changes, and a replay recomputes a range.
Every failure names its case's seed; ``PANE_SEEDS=17,18 pytest tests/engine/test_panes.py`` reruns some.

Then: queries that are not pane-decomposable recompute and store no pane.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query, parse_query
from csparql.core.optimizer import optimize
from csparql.core.panes import ALWAYS, OFF, PanePlan, pane_plan
from csparql.storage.warehouse import Warehouse

from conformance import harness, reference
from conformance.compare import compare, from_engine
from storage.helpers import write_static, write_stream

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
STREAM = "http://example.org/stream/a"
STREAM2 = "http://example.org/stream/b"
ZONES = "http://example.org/zones"
SECOND = 1_000_000
MINUTE = 60 * SECOND
T0 = 1_704_067_200 * SECOND  # 2024-01-01T00:00:00Z
PREFIXES = f"PREFIX : <{EX}>\nPREFIX xsd: <{XSD}>\n"

CASES = 12
"""Random cases (seeds 0 … CASES − 1); the first three fix the window shapes: a RANGE not a multiple of its
STEP, thirty panes of one STEP each, and a RANGE of two STEPs."""
FIXED_WINDOWS = {0: (5 * MINUTE, 2 * MINUTE), 1: (30 * MINUTE, MINUTE), 2: (4 * MINUTE, 2 * MINUTE)}
WINDOWS_PER_CASE = 4
"""Consecutive windows evaluated live, then one quiet window (no stream triple in it)."""
REPLAYED = 4
"""Every fourth case is also replayed."""


def ex(name: str) -> URIRef:
    return URIRef(EX + name)


def typed(lexical: str, datatype: str) -> Literal:
    return Literal(lexical, datatype=URIRef(XSD + datatype), normalize=False)


SENSORS = [ex(f"s{i}") for i in range(6)]
# Numbers of three datatypes, no two equal in value (so MIN and MAX pick one term), in canonical lexical forms
# (the independent evaluator stores literals canonically); "x" makes SUM and AVG an error where it is met.
NUMBERS = [typed(str(n), "integer") for n in (1, 2, 3, 4)] + [
    typed("1.5", "decimal"), typed("2.5", "decimal"), typed("3.25E0", "double"), typed("7.5E-1", "double")]
NOT_A_NUMBER = Literal("x")
TAGS = [ex("red"), ex("green")]


# --- data ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Data:
    streams: dict[str, list]  # stream IRI → (s, p, o, τ) in arrival order
    graphs: dict  # None (the default static graph) or a named graph's IRI → triples


def static_graphs(rng: random.Random) -> dict:
    """Kinds for some sensors (the others have none: OPTIONAL leaves ?k unbound), weights for some, zones."""
    kinds = [(s, ex("kind"), rng.choice([Literal("road"), Literal("rail"), ex("air")]))
             for s in SENSORS if rng.random() < 0.7]
    weights = [(s, ex("weight"), rng.choice(NUMBERS)) for s in SENSORS if rng.random() < 0.5]
    zones = [(s, ex("zone"), rng.choice([ex("north"), ex("south")])) for s in SENSORS if rng.random() < 0.8]
    return {None: kinds + weights, URIRef(ZONES): zones}


def pane_time(rng: random.Random, end: int, pane: int) -> int:
    """A timestamp in the pane (end − pane, end]: on its end (a multiple of the pane, so on window boundaries
    too), just after its start, or anywhere."""
    choice = rng.random()
    if choice < 0.35:
        return end
    if choice < 0.5:
        return end - pane + 1
    return rng.randint(end - pane + 1, end)


def stream_triples(rng: random.Random, pane_ends: list[int], pane: int, size: int, values: bool = True) -> list:
    """``size`` triples over the given panes, about a third of them repeating an earlier triple at another
    timestamp (in the same pane or another)."""
    triples: list = []
    empty = {end for end in pane_ends if rng.random() < 0.3}  # panes that get no triple
    ends = [end for end in pane_ends if end not in empty] or pane_ends
    while len(triples) < size:
        if triples and rng.random() < 0.35:
            s, p, o, tau = rng.choice(triples)
            same_pane = rng.random() < 0.5
            end = tau + (-tau) % pane if same_pane else rng.choice(ends)
            triples.append((s, p, o, pane_time(rng, end, pane)))
            continue
        s = rng.choice(SENSORS)
        p = rng.choice([ex("p"), ex("p"), ex("r"), ex("t")])
        if p == ex("t"):
            o = rng.choice(TAGS)
        else:
            o = NOT_A_NUMBER if rng.random() < 0.06 else rng.choice(NUMBERS)
        triples.append((s, p, o, pane_time(rng, rng.choice(ends), pane)))
    return triples


# --- query shapes ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class Shape:
    text: str
    description: str


def window_shape(rng: random.Random, seed: int) -> tuple[int, int]:
    """(RANGE, STEP) in µs with RANGE/STEP from 2 to 30; RANGE need not be a multiple of STEP."""
    if seed in FIXED_WINDOWS:
        return FIXED_WINDOWS[seed]
    unit = rng.choice([MINUTE, MINUTE, 20 * SECOND])
    step = rng.choice([1, 2, 3])
    return rng.randint(2 * step, 30 * step) * unit, step * unit


def duration(micros: int) -> str:
    return f"{micros // MINUTE}m" if micros % MINUTE == 0 else f"{micros // SECOND}s"


# What a case's seed fixes, in turn, so that a few consecutive seeds cover every shape; the rest is drawn.
FORMS = ["aggregate", "distinct", "aggregate", "ask or construct", "aggregate", "aggregate"]  # by seed % 6
STREAM_SHAPES = ["one", "union", "one", "two streams", "named", "one", "union"]  # by seed % 7
FIRST_STATICS = ["kind", "zone", "kind-optional", "weight-optional", "kind-twice"]  # by seed % 5
FIRST_AGGREGATES = ["COUNT(*)", "SUM(?v)", "AVG(?v)", "MIN(?v)", "COUNT(DISTINCT ?v)", "MAX(?v)",
                    "SUM(DISTINCT ?v)", "COUNT(?v)"]  # by the number of aggregations before
KEYED = ("COUNT(*)", "COUNT(?", "SUM(?", "AVG(?")


def query_shape(rng: random.Random, window: str, seed: int) -> Shape:
    """A pane-decomposable query: one stream triple pattern per solution (a UNION of two, or two streams in the
    default graph), joined with static patterns (the default graph, GRAPH <zones>), OPTIONAL on the static side,
    FILTER and BIND; the output an aggregation (GROUP BY, HAVING, ORDER BY + LIMIT), a DISTINCT projection, an
    ASK or a CONSTRUCT."""
    form = FORMS[seed % 6]
    if form == "ask or construct":
        form = "ask" if seed // 6 % 2 == 0 else "construct"
    aggregation = seed // 6 * 4 + {0: 0, 2: 1, 4: 2, 5: 3}.get(seed % 6, 0)  # aggregations before this one
    first_call = FIRST_AGGREGATES[aggregation % len(FIRST_AGGREGATES)]
    stream = STREAM_SHAPES[seed % 7]
    datasets = [f"FROM {'NAMED ' if stream == 'named' else ''}STREAM <{STREAM}> {window}"]
    if stream == "two streams":  # a triple in both windows is one triple of the default graph
        datasets.append(f"FROM STREAM <{STREAM2}> {window}")
    where: list[str] = []
    bound = {"?s": "iri"}  # variable → "iri", "value" (any literal), "number" or "maybe" (may be unbound)
    if stream == "union":
        if rng.random() < 0.35 and not (form == "aggregate" and first_call.startswith(KEYED)):  # solutions of static triples only, in every window (not with keyed partials)
            stream = "union with a static pattern"
            where.append("{ ?s :p ?v } UNION { ?s :weight ?v }")
        else:
            where.append("{ ?s :p ?v } UNION { ?s :r ?v }")
    elif stream == "named":
        if rng.random() < 0.5:
            where.append(f"GRAPH <{STREAM}> {{ ?s :p ?v }}")
        else:
            where.append("GRAPH ?g { ?s :p ?v }")
            bound["?g"] = "iri"
    else:
        where.append("?s :p ?v .")
    bound["?v"] = "value"
    statics = [FIRST_STATICS[seed % 5]] + rng.sample(FIRST_STATICS, rng.choice([0, 0, 1]))
    statics = list(dict.fromkeys(statics))
    if "kind-optional" in statics and ("kind" in statics or "kind-twice" in statics):
        statics.remove("kind-optional")
    if "kind" in statics and "kind-twice" in statics:
        statics.remove("kind")
    for static in statics:
        if static == "kind":
            where.append("?s :kind ?k .")
            bound["?k"] = "value"
        elif static == "kind-twice":  # every solution twice (a multiset), or once per kind through a sub-select
            if rng.random() < 0.5:
                where.append("{ ?s :kind ?k } UNION { ?s :kind ?k }")
                bound["?k"] = "value"
            else:
                where.append("{ SELECT ?s WHERE { ?s :kind ?any } }")
        elif static == "kind-optional":
            where.append("OPTIONAL { ?s :kind ?k }")
            bound["?k"] = "maybe"
        elif static == "weight-optional":
            where.append("OPTIONAL { ?s :weight ?w }")
            bound["?w"] = "maybe"
        else:
            datasets.append(f"FROM NAMED <{ZONES}>")
            if rng.random() < 0.5:
                where.append(f"GRAPH <{ZONES}> {{ ?s :zone ?z }}")
            else:  # the windows are named graphs too, but hold no :zone triple
                where.append("GRAPH ?zg { ?s :zone ?z }")
                bound["?zg"] = "iri"
            bound["?z"] = "iri"
    numeric = rng.random() < 0.35 or (form == "aggregate" and first_call.startswith(("MIN", "MAX")))
    filters = ["FILTER(isNumeric(?v))"] if numeric else []
    if numeric:
        bound["?v"] = "number"
    if rng.random() < 0.3:
        filters.append(rng.choice(["FILTER(?s != :s3)", "FILTER(?v != 2)", "FILTER(!isNumeric(?v) || ?v >= 1.5)"]))
    where.extend(filters)
    if rng.random() < 0.3:
        where.append("BIND(?v * 2 AS ?d)")
        bound["?d"] = "maybe"
    if "?k" in bound and rng.random() < 0.5:
        where.append('BIND(COALESCE(?k, "none") AS ?kk)')
        bound["?kk"] = "value"
    body = "\n  ".join(where)
    head = "\n".join(datasets)
    described = f"{form}; stream {stream}; statics {statics}; filters {filters}"

    if form == "ask":
        return Shape(f"{PREFIXES}ASK\n{head}\nWHERE {{\n  {body}\n  FILTER(?v > 3)\n}}", described)
    if form == "construct":
        template = "?s :seen ?v ." + (" ?s :kindOf ?k ." if "?k" in bound else "") + (" ?s :in ?z ." if "?z" in bound else "")
        return Shape(f"{PREFIXES}CONSTRUCT {{ {template} }}\n{head}\nWHERE {{\n  {body}\n}}", described)
    if form == "distinct":
        candidates = [v for v in bound if v != "?w"]
        projected = rng.sample(candidates, rng.randint(1, min(3, len(candidates))))
        tail = ""
        if projected == ["?s"] and rng.random() < 0.5:
            tail = "\nORDER BY ?s LIMIT 3"
        return Shape(f"{PREFIXES}SELECT DISTINCT {' '.join(projected)}\n{head}\nWHERE {{\n  {body}\n}}{tail}",
                     described)

    # an aggregation
    keys = [None, "?s", "?s"] + [v for v in ("?k", "?z", "?kk") if v in bound]
    ordered = aggregation % 4 == 2  # ORDER BY + LIMIT, grouped by ?s
    key = "?s" if ordered else None if aggregation % 3 == 0 else rng.choice(keys[1:])
    calls = ["COUNT(*)", "COUNT(?v)", "SUM(?v)", "AVG(?v)", "COUNT(DISTINCT ?v)", "SUM(DISTINCT ?v)",
             "AVG(DISTINCT ?v)"]
    if bound["?v"] == "number":  # MIN and MAX over bound numbers only: no order between numbers and strings
        calls += ["MIN(?v)", "MAX(?v)", "MIN(?v)", "MAX(?v)"]
    unbound = [f"COUNT({v})" for v, kind in bound.items() if kind == "maybe"]  # arguments unbound in some rows
    if "?w" in bound:
        unbound += ["SUM(?w)", "AVG(?w)"]
    calls += unbound
    if stream == "union with a static pattern":  # COUNT, SUM and AVG without DISTINCT need a stream triple
        calls = [call for call in calls if "DISTINCT" in call or call.startswith(("MIN", "MAX"))]
    chosen = [first_call] + rng.sample(calls, rng.randint(0, 2))
    if unbound and rng.random() < 0.7:
        chosen.append(rng.choice(unbound))
    if ordered and stream == "union with a static pattern":
        chosen = ["COUNT(DISTINCT ?v)"] + chosen
    elif ordered:  # ORDER BY + LIMIT over an integer aggregate and the group key: the rows kept are determined
        chosen = [rng.choice(["COUNT(*)", "COUNT(DISTINCT ?v)", "COUNT(?v)"])] + chosen
    chosen = [call for call in dict.fromkeys(chosen)
              if not (stream == "union with a static pattern" and call.startswith(KEYED) and "DISTINCT" not in call)]
    select = " ".join(f"({call} AS ?a{i})" for i, call in enumerate(chosen))
    text = f"{PREFIXES}SELECT {key + ' ' if key else ''}{select}\n{head}\nWHERE {{\n  {body}\n}}"
    if key:
        text += f"\nGROUP BY {key}"
    if aggregation % 3 == 1:
        havings = ["HAVING (COUNT(DISTINCT ?v) < 3)", "HAVING (COUNT(DISTINCT ?v) > 1)"]
        if stream != "union with a static pattern":
            havings += ["HAVING (COUNT(*) > 1)", "HAVING (SUM(?v) >= 3)"]
        text += "\n" + rng.choice(havings)
    if ordered:
        text += f"\nORDER BY DESC(?a0) ?s LIMIT {rng.randint(1, 3)}"
    return Shape(text, f"{described}; aggregates {chosen} by {key}")


# --- cases -----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PaneCase:
    seed: int
    range: int
    step: int
    shape: Shape
    data: Data
    first_end: int  # the end of the first live window
    late: dict[str, list]  # late triples per stream, landed after the live windows

    @property
    def pane(self) -> int:
        return math.gcd(self.range, self.step)

    @property
    def ends(self) -> list[int]:
        """The live windows' ends, in time order, then a quiet window's."""
        live = [self.first_end + i * self.step for i in range(WINDOWS_PER_CASE)]
        quiet = ((live[-1] + 3 * self.range) // self.step + 1) * self.step
        return live + [quiet]

    def describe(self) -> str:
        return (f"case seed {self.seed}: [RANGE {duration(self.range)} STEP {duration(self.step)}] (pane "
                f"{duration(self.pane)}); {self.shape.description}\n{self.shape.text}")


def make_case(seed: int) -> PaneCase:
    rng = random.Random(f"panes-{seed}")
    range_, step = window_shape(rng, seed)
    window = f"[RANGE {duration(range_)} STEP {duration(step)}]"
    shape = query_shape(rng, window, seed)
    pane = math.gcd(range_, step)
    first_end = (T0 // step + 3) * step
    last_end = first_end + (WINDOWS_PER_CASE - 1) * step
    # panes from before the first window to after the last live one
    pane_ends = list(range(first_end - range_ - 2 * pane, last_end + 3 * pane, pane))
    pane_ends = [end for end in pane_ends if end % pane == 0]
    streams = {STREAM: stream_triples(rng, pane_ends, pane, rng.randint(40, 90))}
    streams[STREAM2] = stream_triples(rng, pane_ends, pane, 25) + [  # some triples in both streams
        (s, p, o, tau if rng.random() < 0.5 else pane_time(rng, rng.choice(pane_ends), pane))
        for s, p, o, tau in rng.sample(streams[STREAM], 8)]
    graphs = static_graphs(rng)
    if rng.random() < 0.3:  # the default graph is the windows and the default static graph: it holds :p too
        graphs[None] += [(s, p, o) for s, p, o, _ in rng.sample(streams[STREAM], 2)] + [
            (SENSORS[1], ex("p"), NUMBERS[4])]
    late_ends = [end for end in pane_ends if first_end - range_ < end <= last_end]
    beyond = [last_end + pane, last_end + 2 * pane]
    late = {}
    for iri, triples in streams.items():
        again = [(s, p, o, pane_time(rng, rng.choice(late_ends), pane)) for s, p, o, _ in rng.sample(triples, 3)]
        late[iri] = stream_triples(rng, late_ends, pane, 5) + again + stream_triples(rng, beyond, pane, 2)
    return PaneCase(seed, range_, step, shape, Data(streams, graphs), first_end, late)


def land(warehouse: Warehouse, rng: random.Random, streams: dict[str, list], commits: int) -> None:
    """Append each stream's triples, shuffled (out of order), in ``commits`` commits."""
    for iri, triples in streams.items():
        shuffled = list(triples)
        rng.shuffle(shuffled)
        size = math.ceil(len(shuffled) / commits)
        for start in range(0, len(shuffled), size):
            write_stream(warehouse, iri, shuffled[start:start + size], first_arrival=rng.randint(0, 10**6))


def seeds() -> list[int]:
    chosen = os.environ.get("PANE_SEEDS")
    return [int(s) for s in chosen.split(",")] if chosen else list(range(CASES))


@pytest.fixture(scope="module")
def interpreted(spark):
    """The session with the conformance harness's settings for many tiny evaluations (``harness.configure``)."""
    keys = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
    saved = {key: spark.conf.get(key, None) for key in keys}
    harness.configure(spark)
    yield spark
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


class Checker:
    """Evaluates one case's windows by panes, by recompute and by the independent evaluator."""

    def __init__(self, case: PaneCase, engine: Engine, name: str):
        self.case = case
        self.engine = engine
        self.name = name
        self.plan = compile_query(case.shape.text)
        self.keys, self.star = harness.ordering(parse_query(case.shape.text))
        self.streams = {URIRef(iri): list(triples) for iri, triples in case.data.streams.items()}
        self.graphs = {iri: list(triples) for iri, triples in case.data.graphs.items()}

    def decision(self):
        return pane_plan(optimize(self.plan, self.engine.catalog.statistics()))

    def oracle(self, end: int):
        return reference.evaluate(reference.Case(f"seed{self.case.seed}", self.case.shape.text, self.streams,
                                                 self.graphs, end))

    def check(self, end: int, what: str):
        """Evaluate the window ending at ``end`` by panes and by recompute; both must equal the oracle.
        Returns the pane evaluation."""
        by_panes = self.engine.evaluate(self.plan, end, self.name, write=False, panes=ALWAYS)
        recomputed = self.engine.evaluate(self.plan, end, self.name, write=False, panes=OFF)
        where = f"{what}, window ending {end} ({(end - T0) / MINUTE:g} min after T0)\n{self.case.describe()}"
        assert by_panes.panes is not None, f"not evaluated from panes: {where}"
        assert recomputed.panes is None, where
        self.compare(by_panes.result, recomputed.result, "panes vs recompute", where)
        expected = self.oracle(end)
        self.compare(recomputed.result, expected, "recompute vs oracle", where, oracle=True)
        self.compare(by_panes.result, expected, "panes vs oracle", where, oracle=True)
        return by_panes

    def compare(self, actual, expected, label: str, where: str, oracle: bool = False) -> None:
        expected = expected if oracle else from_engine(expected)
        problems = compare(from_engine(actual), expected, self.keys, any_var_order=self.star)
        assert not problems, f"{label} differ: {where}\n" + "\n".join(problems)


def run_case(seed: int, spark, root: Path) -> None:
    """Land a case's data in a warehouse under ``root`` and check its windows: live, after late data, after a
    static change and (every ``REPLAYED``-th case) replayed."""
    case = make_case(seed)
    rng = random.Random(f"landing-{seed}")
    warehouse = Warehouse(root / f"warehouse{seed}")
    for iri, triples in case.data.graphs.items():
        write_static(warehouse, None if iri is None else str(iri), triples)
    land(warehouse, rng, case.data.streams, commits=3)
    engine = Engine(warehouse, spark)
    checker = Checker(case, engine, "Q")
    decision = checker.decision()
    assert isinstance(decision, PanePlan), f"not pane-decomposable: {decision}\n{case.describe()}"
    assert decision.windows[0].pane == case.pane, case.describe()

    # live: windows in time order; each later window computes only its new panes
    uses = [checker.check(end, "live").panes for end in case.ends]
    first, *later = uses[:WINDOWS_PER_CASE]
    assert first.computed == first.panes == case.range // case.pane, case.describe()
    for use in later:
        assert use.computed == case.step // case.pane < use.panes, (uses, case.describe())
    key = first.key

    # late data: triples land in panes of windows already evaluated, and beyond them
    land(warehouse, rng, case.late, commits=1)
    for iri, triples in case.late.items():
        checker.streams[URIRef(iri)].extend(triples)
    read = [STREAM, STREAM2] if STREAM2 in case.shape.text else [STREAM]
    reached = {tau + (-tau) % case.pane for iri in read for _, _, _, tau in case.late[iri]}
    again = case.ends[:WINDOWS_PER_CASE] + [case.ends[WINDOWS_PER_CASE - 1] + case.step]
    computed = 0
    evaluated: set[int] = set()
    for end in again:
        use = checker.check(end, "after late data").panes
        window_panes = set(range(end - case.range + case.pane, end + 1, case.pane))
        if reached & window_panes - evaluated:
            assert use.computed > 0, f"late data reached panes of the window, none recomputed\n{case.describe()}"
        evaluated |= window_panes
        computed += use.computed
    assert computed >= len(reached & evaluated), case.describe()

    # a static graph changes: a new pane key, every pane computed again
    changed = [(SENSORS[5], ex("kind"), Literal("tram")), (SENSORS[0], ex("weight"), typed("5", "integer"))]
    zoned = [(SENSORS[5], ex("zone"), ex("east"))]
    write_static(warehouse, None, changed)
    write_static(warehouse, ZONES, zoned)
    checker.graphs[None] += changed
    checker.graphs[URIRef(ZONES)] += zoned
    use = checker.check(case.ends[WINDOWS_PER_CASE - 1], "after a static change").panes
    assert use.key != key and use.computed == use.panes, (use, case.describe())

    if seed % REPLAYED == 0:
        start, stop = case.ends[0], case.ends[WINDOWS_PER_CASE - 1]
        replayed = list(engine.replay(checker.plan, start, stop, "Replayed", write=False, panes=ALWAYS))
        recomputed = list(engine.replay(checker.plan, start, stop, "Replayed", write=False, panes=OFF))
        assert [e.window.end for e in replayed] == [e.window.end for e in recomputed] == case.ends[:WINDOWS_PER_CASE]
        # the replay computed every pane in one job before its first window: no window computes one
        assert all(e.panes is not None and e.panes.computed == 0 for e in replayed), case.describe()
        for by_panes, by_recompute in zip(replayed, recomputed):
            checker.compare(by_panes.result, by_recompute.result, "replay by panes vs recompute",
                            f"replay, window ending {by_panes.window.end}\n{case.describe()}")


@pytest.fixture(scope="module")
def outcomes(interpreted, tmp_path_factory):
    """Every case run in a few threads ahead of the tests that report them (Spark runs several threads' jobs
    at once, which hides most of its per-job latency), as the conformance harness's ``Prefetcher`` does."""
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path_factory.mktemp("panes")
    pool = ThreadPoolExecutor(3)
    futures = {seed: pool.submit(run_case, seed, interpreted, root) for seed in seeds()}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("seed", seeds())
def test_windows_from_panes_equal_recompute_and_the_oracle(seed, outcomes):
    outcomes[seed].result()  # raises the case's failure


SHAPES_COVERED = {
    "COUNT(*)": "(COUNT(*)", "COUNT(?x)": "(COUNT(?v)", "SUM": "(SUM(?v)", "AVG": "(AVG(?v)", "MIN": "(MIN(",
    "MAX": "(MAX(", "COUNT(DISTINCT)": "(COUNT(DISTINCT", "SUM(DISTINCT)": "(SUM(DISTINCT", "GROUP BY": "GROUP BY",
    "HAVING": "HAVING", "ORDER BY + LIMIT over aggregates": "ORDER BY DESC(?a0)", "SELECT DISTINCT": "SELECT DISTINCT",
    "ASK": "\nASK", "CONSTRUCT": "CONSTRUCT", "a static join": "?s :kind ?k .", "FROM NAMED + GRAPH": "FROM NAMED <",
    "OPTIONAL on the static side": "OPTIONAL", "a UNION of two stream patterns": "{ ?s :p ?v } UNION { ?s :r ?v }",
    "FILTER": "FILTER", "BIND": "BIND", "two streams": f"FROM STREAM <{STREAM2}>",
    "an aggregate of an argument unbound in some solutions": ("(COUNT(?k)", "(COUNT(?w)", "(COUNT(?d)", "(SUM(?w)", "(AVG(?w)"),
}


def test_the_cases_cover_every_shape_and_an_aggregate_without_groups():
    texts = [make_case(seed).shape.text for seed in range(CASES)]
    for shape, marks in SHAPES_COVERED.items():
        marks = (marks,) if isinstance(marks, str) else marks
        assert any(mark in text for text in texts for mark in marks), f"no case has {shape}"
    assert any("SELECT (COUNT(*)" in text and "GROUP BY" not in text for text in texts)  # one row 0 when quiet
    ratios = [make_case(seed).range / make_case(seed).step for seed in range(CASES)]
    assert min(ratios) == 2 and max(ratios) == 30 and any(r != int(r) for r in ratios)


# --- queries that recompute ------------------------------------------------------------------------------

RECOMPUTED = {
    "two stream patterns joined": ("SELECT (COUNT(*) AS ?n)", "?s :p ?v . ?s :r ?w", "", "[RANGE 10m STEP 2m]",
                                   "joins 2 triple patterns over a stream window"),
    # over IRIs: the evaluator finds a triple's timestamp by its terms, which pyoxigraph stores canonically
    "timestamp()": ("SELECT DISTINCT ?s ?t", "?s :t ?tag BIND(timestamp(?s) AS ?t)", "", "[RANGE 10m STEP 2m]",
                    "timestamp()"),
    "SAMPLE": ("SELECT ?s (SAMPLE(?v) AS ?x)", "?s :p ?v", "GROUP BY ?s", "[RANGE 10m STEP 2m]",
               "SAMPLE may take any value"),
    "ISTREAM": ("SELECT ISTREAM DISTINCT ?s", "?s :p ?v", "", "[RANGE 10m STEP 2m]",
                "ISTREAM compares each window's result"),
    "tumbling": ("SELECT (COUNT(*) AS ?n)", "?s :p ?v", "", "[RANGE 10m TUMBLING]", "tumbling"),
    "step = range": ("SELECT DISTINCT ?s", "?s :p ?v", "", "[RANGE 10m STEP 10m]", "tumbling"),
}


@pytest.mark.parametrize("name", sorted(RECOMPUTED))
def test_queries_that_are_not_pane_decomposable_recompute_and_store_no_pane(name, interpreted, tmp_path):
    select, where, tail, window, reason = RECOMPUTED[name]
    text = f"{PREFIXES}{select}\nFROM STREAM <{STREAM}> {window}\nWHERE {{ {where} }} {tail}"
    rng = random.Random(name)
    warehouse = Warehouse(tmp_path / "warehouse")
    end = (T0 // (10 * MINUTE) + 2) * 10 * MINUTE
    triples = stream_triples(rng, list(range(end - 20 * MINUTE, end + 1, MINUTE)), MINUTE, 40)
    land(warehouse, rng, {STREAM: triples}, commits=2)
    engine = Engine(warehouse, interpreted)
    plan = compile_query(text)
    decision = pane_plan(optimize(plan, engine.catalog.statistics()))
    assert not isinstance(decision, PanePlan) and reason in decision.reason, decision
    for at in (end - 2 * MINUTE, end):
        evaluation = engine.evaluate(plan, at, "Recomputed", write=False, panes=ALWAYS)
        assert evaluation.panes is None
        if name not in ("SAMPLE", "ISTREAM"):  # the evaluator's SAMPLE picks its own; ISTREAM needs two windows
            expected = reference.evaluate(reference.Case(name, text, {URIRef(STREAM): triples}, {}, at))
            assert not compare(from_engine(evaluation.result), expected)
    assert not warehouse.panes("Recomputed").exists()
