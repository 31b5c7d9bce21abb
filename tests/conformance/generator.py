"""Seeded generation of data (streams with timestamps, static graphs) and of random C-SPARQL queries.

``generated_cases(seeds)`` gives one ``Case`` per seed: the category of the query is chosen by the seed
(``CATEGORIES`` in turn), the data set by ``seed % DATA_SETS``, and the query text by a ``random.Random(seed)``.
Everything is deterministic: the same seed always gives the same query and data.

The data are small and dense so that joins meet: eight entities ``ex:e0``…``ex:e7``; three streams with
about twenty triples each over twenty minutes (some triples twice at two instants, some instants shared,
arrivals not in timestamp order, some timestamps exactly on window bounds); a default static graph that
shares the predicate ``ex:p`` with the streams (so the default graph is a true union, with triples in both
a window and a static graph), and two named static graphs, one with a blank node. Values mix integers,
decimals, doubles, strings with and without language tags and booleans, so that expressions meet SPARQL's
error cases. Numbers are written in the forms pyoxigraph keeps (it stores literals canonically, so
``"3"^^xsd:int`` would come back as ``"3"^^xsd:integer``); ill-typed literals are left to the W3C tests
(pyoxigraph compares two equal ill-typed literals with ``>=`` as true, SPARQL makes it an error).

Variables have kinds (entity, integer, number, string) so that filters are mostly meaningful. Queries that
use LIMIT order by every projected variable, over stream triples only (IRIs and integers, no blank nodes), so
the rows kept are determined. MIN and MAX only aggregate variables bound in every solution (see
``reference``). GROUP_CONCAT and SAMPLE are not generated (their results depend on an order the query does
not fix); the W3C tests cover them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from rdflib import BNode, Literal, URIRef

from conformance.reference import Case

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
S1 = URIRef("http://streams.example.org/s1")
S2 = URIRef("http://streams.example.org/s2")
S3 = URIRef("http://streams.example.org/s3")
G1 = URIRef(EX + "g1")
G2 = URIRef(EX + "g2")
T0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds
MINUTE = 60_000_000
DATA_SETS = 4
PREFIXES = (
    "PREFIX ex: <http://example.org/>\n"
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
    "PREFIX f: <http://larkc.eu/csparql/sparql/jena/ext#>\n"
)
STREAM_NAMES = {S1: "<http://streams.example.org/s1>", S2: "<http://streams.example.org/s2>", S3: "<http://streams.example.org/s3>"}


def ex(name: str) -> URIRef:
    return URIRef(EX + name)


def integer(n: int) -> Literal:
    return Literal(str(n), datatype=URIRef(XSD + "integer"), normalize=False)


def typed(lexical: str, datatype: str) -> Literal:
    return Literal(lexical, datatype=URIRef(XSD + datatype), normalize=False)


ENTITIES = [ex(f"e{i}") for i in range(8)]
WORDS = ["alpha", "Beta", "gamma delta", "delta", "Alphabet", "epsilon", "beta"]
STRINGS = [Literal(w) for w in WORDS] + [Literal("chat", lang="fr"), Literal("cat", lang="en"), Literal("Cat", lang="en-GB")]
NUMBERS = [integer(n) for n in (-2, 0, 1, 2, 3, 5, 7, 10)] + [
    typed("1.5", "decimal"),
    typed("2.25", "decimal"),
    typed("2.0E0", "double"),
    typed("-0.5E1", "double"),
    typed("0.75", "decimal"),
    Literal("4"),
    typed("true", "boolean"),
]


# --- data ---------------------------------------------------------------------------------------------------


@dataclass
class Data:
    streams: dict = field(default_factory=dict)
    graphs: dict = field(default_factory=dict)


def _stream(rng: random.Random, predicates: list[str], size: int) -> list:
    items = []
    for _ in range(size):
        predicate = rng.choice(predicates)
        subject = rng.choice(ENTITIES[:6])
        if predicate in ("p", "w"):
            obj = rng.choice(ENTITIES[:6])
        elif predicate == "q":
            obj = integer(rng.randint(0, 9))
        else:
            obj = rng.choice(STRINGS)
        # timestamps on a 15 s grid over 20 minutes: instants repeat, and some fall on window bounds
        tau = T0 + rng.randint(0, 80) * 15_000_000
        items.append((subject, ex(predicate), obj, tau))
    for _ in range(3):  # the same triple again, later
        s, p, o, tau = rng.choice(items)
        items.append((s, p, o, min(tau + rng.randint(1, 12) * 30_000_000, T0 + 20 * MINUTE)))
    items.sort(key=lambda item: item[3])
    for _ in range(4):  # some arrive out of timestamp order
        i, j = rng.randrange(len(items)), rng.randrange(len(items))
        items[i], items[j] = items[j], items[i]
    return items


def make_data(seed: int) -> Data:
    rng = random.Random(10_000 + seed)
    data = Data()
    data.streams[S1] = _stream(rng, ["p", "q", "r"], 30)
    data.streams[S2] = _stream(rng, ["p", "q", "w"], 24)
    data.streams[S3] = _stream(rng, ["p", "q"], 16)
    default = []
    for _ in range(8):
        default.append((rng.choice(ENTITIES), ex("s"), rng.choice(ENTITIES)))
    for entity in ENTITIES:
        default.append((entity, ex("val"), rng.choice(NUMBERS)))
        if rng.random() < 0.7:
            default.append((entity, ex("name"), rng.choice(STRINGS)))
    for _ in range(3):  # ex:p is also a stream predicate: some of these triples are in windows too
        s, p, o, _ = rng.choice(data.streams[S1])
        default.append((s, ex("p"), rng.choice(ENTITIES)) if p != ex("p") else (s, p, o))
    blank = BNode("anon0")
    inner = BNode("anon2")  # a chain of blank nodes, for DESCRIBE's concise bounded descriptions
    default += [
        (blank, ex("name"), Literal("anon")),
        (blank, ex("s"), ENTITIES[1]),
        (ENTITIES[2], ex("flag"), typed("true", "boolean")),
        (ENTITIES[rng.randint(0, 5)], ex("s"), blank),
        (blank, ex("t"), inner),
        (inner, ex("name"), Literal("inner")),
    ]
    data.graphs[None] = list(dict.fromkeys(default))
    g1 = [(rng.choice(ENTITIES), ex("t"), rng.choice(ENTITIES)) for _ in range(6)] + [
        (rng.choice(ENTITIES), ex("val"), integer(rng.randint(0, 9))) for _ in range(4)
    ]
    g2 = [(rng.choice(ENTITIES), ex("t"), rng.choice(ENTITIES)) for _ in range(4)] + [
        (BNode("anon1"), ex("t"), ENTITIES[2]),
        (rng.choice(ENTITIES), ex("name"), rng.choice(STRINGS)),
    ]
    data.graphs[G1] = list(dict.fromkeys(g1))
    data.graphs[G2] = list(dict.fromkeys(g2))
    return data


# --- queries ------------------------------------------------------------------------------------------------

# predicate -> (kind of the object, where it lives)
PREDICATES = {
    "p": ("ent", "both"),
    "q": ("int", "stream"),
    "r": ("str", "stream"),
    "w": ("ent", "stream"),
    "s": ("ent", "static"),
    "val": ("num", "static"),
    "name": ("str", "static"),
    "t": ("ent", "named"),
}
STREAM_PREDICATES = {S1: ["p", "q", "r"], S2: ["p", "q", "w"], S3: ["p", "q"]}


class QueryGen:
    """Builds one query: a pool of typed variables, triple patterns over the predicates a context can read,
    and filter expressions that fit the variables' kinds."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.kinds: dict[str, str] = {}
        self.counter = 0
        self.certain: set[str] = set()  # variables bound in every solution of the WHERE clause

    def var(self, kind: str, reuse: float = 0.6) -> str:
        existing = [v for v, k in self.kinds.items() if k == kind]
        if existing and self.rng.random() < reuse:
            return self.rng.choice(existing)
        name = f"?{ {'ent': 'e', 'int': 'n', 'num': 'x', 'str': 's'}[kind] }{self.counter}"
        self.counter += 1
        self.kinds[name] = kind
        return name

    def triple(self, predicates: list[str], certain: bool = True, subject: str | None = None) -> str:
        rng = self.rng
        predicate = rng.choice(predicates)
        kind = PREDICATES[predicate][0]
        s = subject or self.var("ent")
        if kind == "ent":
            others = [v for v, k in self.kinds.items() if k == "ent" and v != s]
            if rng.random() < 0.1:
                o = f"ex:e{rng.randint(0, 5)}"
            elif others and rng.random() < 0.35:
                o = rng.choice(others)
            else:
                o = self.var("ent", reuse=0.0)
        else:
            o = self.var(kind, reuse=0.25)
        if certain:
            self.certain.update(x for x in (s, o) if x.startswith("?"))
        return f"{s} ex:{predicate} {o} ."

    def bgp(self, predicates: list[str], size: int, certain: bool = True) -> list[str]:
        triples = []
        for i in range(size):
            subject = None
            entities = [v for v, k in self.kinds.items() if k == "ent"]
            if entities and self.rng.random() < 0.8:
                subject = self.rng.choice(entities)
            triples.append(self.triple(predicates, certain, subject))
        return triples

    def vars_of(self, kind: str, only: set[str] | None = None) -> list[str]:
        return [v for v, k in self.kinds.items() if k == kind and (only is None or v in only)]

    # expressions

    def condition(self, depth: int = 0, only: set[str] | None = None) -> str:
        rng = self.rng
        if depth < 2 and rng.random() < 0.3:
            op = rng.choice(["&&", "||", "!"])
            if op == "!":
                return f"!({self.condition(depth + 1, only)})"
            return f"({self.condition(depth + 1, only)} {op} {self.condition(depth + 1, only)})"
        choices = []
        for kind in ("ent", "int", "num", "str"):
            if self.vars_of(kind, only):
                choices.append(kind)
        if not choices:
            return "true"
        kind = rng.choice(choices)
        v = rng.choice(self.vars_of(kind, only))
        if kind == "ent":
            other = self.vars_of("ent", only)
            return rng.choice(
                [
                    f"{v} = ex:e{rng.randint(0, 7)}",
                    f"{v} != ex:e{rng.randint(0, 7)}",
                    f"{v} != {rng.choice(other)}",
                    f"isIRI({v})",
                    f"isBlank({v})",
                    f'STR({v}) > "http://example.org/e{rng.randint(1, 6)}"',
                    f"{v} IN (ex:e1, ex:e3, ex:e5)",
                    f"{v} NOT IN (ex:e0, ex:e2)",
                    f"sameTerm({v}, {rng.choice(other)})",
                    f"BOUND({v})",
                    f'STRSTARTS(STR({v}), "http://example.org/e")',
                ]
            )
        if kind in ("int", "num"):
            numbers = self.vars_of("int", only) + self.vars_of("num", only)
            w = rng.choice(numbers)
            k = rng.randint(-1, 6)
            return rng.choice(
                [
                    f"{v} > {k}",
                    f"{v} <= {k}",
                    f"{v} = {k}",
                    f"{v} != {k}",
                    f"{v} + 1 > {w}",
                    f"{v} * 2 >= {k}",
                    f"{v} - {w} < {k}",
                    f"{v} / 2 > {k / 2}",
                    f"ABS({v}) >= {k}",
                    f"ROUND({v} / 3) = {max(k, 0)}",
                    f"CEIL({v} * 0.7) > {k}",
                    f"FLOOR({v}) < {k}",
                    f"isNumeric({v})",
                    f"{v} IN (1, 2, 3, 2.25)",
                    f"{v} >= {k}.5",
                    f"{v} < {k}.0e0",
                    f"xsd:integer({v}) = {k}",
                    f"xsd:double({v}) > {k}",
                    f"DATATYPE({v}) = xsd:integer",
                    f"BOUND({v}) && {v} > {k}",
                    f"COALESCE({v}, 0) > {k}",
                    f"IF({v} > {k}, true, false)",
                ]
            )
        word = rng.choice(["a", "al", "B", "e", "ta", "cat"])
        return rng.choice(
            [
                f"STRLEN({v}) > {rng.randint(3, 6)}",
                f'CONTAINS({v}, "{word}")',
                f'STRSTARTS({v}, "{word}")',
                f'STRENDS({v}, "{word}")',
                f'REGEX({v}, "^{word}", "i")',
                f'REGEX(STR({v}), "{word}")',
                f'LANG({v}) = "en"',
                f'LANG({v}) = ""',
                f'langMatches(LANG({v}), "en")',
                f'UCASE({v}) = "ALPHA"',
                f'LCASE({v}) = "beta"',
                f'{v} = "alpha"',
                f'{v} < "c"',
                f'STR({v}) >= "beta"',
                f'SUBSTR({v}, 1, 2) = "{word[:2]}"',
                f'CONCAT({v}, "!") != "alpha!"',
                f'STRBEFORE({v}, "t") = "be"',
                f'STRAFTER({v}, "a") != ""',
                f"isLiteral({v})",
                f'{v} = "cat"@en',
                f'STRLEN(REPLACE({v}, "a", "")) < 4',
            ]
        )

    def projection(self, pool: list[str], size: int | None = None) -> list[str]:
        size = size or self.rng.randint(1, min(4, len(pool)))
        return sorted(self.rng.sample(pool, min(size, len(pool))))


def _window(rng: random.Random, physical: float = 0.0) -> str:
    if rng.random() < physical:
        return f"[TRIPLES {rng.choice([4, 8, 12, 20])}]"
    width = rng.choice([5, 10, 15, 15, 20, 20])
    step = rng.choice([1, 5, width])
    if step > width:
        step = width
    if step == width and rng.random() < 0.5:
        return f"[RANGE {width}m TUMBLING]"
    spelled = rng.choice(["m", "m", " MIN", " minutes"])
    return f"[RANGE {width}{spelled} STEP {step}{spelled}]"


def _head(rng: random.Random, name: str) -> str:
    if rng.random() < 0.5:
        every = rng.choice(["", " COMPUTED EVERY 1m", " COMPUTED EVERY 5m"])
        return f"REGISTER QUERY {name}{every} AS\n"
    return ""


def _group(lines: list[str], indent: str = "  ") -> str:
    return "{\n" + "\n".join(indent + line for line in lines) + "\n}"


class _Builder:
    """A query under construction: head, dataset clauses, WHERE lines and the rest."""

    def __init__(self, seed: int, category: str):
        self.rng = random.Random(seed)
        self.seed = seed
        self.category = category
        self.gen = QueryGen(self.rng)
        self.datasets: list[str] = []
        self.where: list[str] = []
        self.tail: list[str] = []
        self.select = "SELECT *"
        self.form = "select"

    def stream(self, iri: URIRef, physical: float = 0.15, named: bool = False) -> None:
        self.datasets.append(f"FROM {'NAMED ' if named else ''}STREAM {STREAM_NAMES[iri]} {_window(self.rng, physical)}")

    def text(self) -> str:
        head = _head(self.rng, f"Gen{self.seed}") if self.datasets and any("STREAM" in d for d in self.datasets) else ""
        return head + PREFIXES + self.select + "\n" + "".join(d + "\n" for d in self.datasets) + "WHERE " + _group(self.where) + "".join("\n" + t for t in self.tail) + "\n"

    def maybe_filter(self, probability: float = 0.5, only: set[str] | None = None) -> None:
        if self.rng.random() < probability:
            self.where.append(f"FILTER ({self.gen.condition(only=only)})")

    def select_some(self, distinct: float = 0.3, pool: list[str] | None = None) -> list[str]:
        pool = pool if pool is not None else [v for v in self.gen.kinds]
        chosen = self.gen.projection(pool)
        if self.rng.random() < 0.15:
            self.select = "SELECT" + (" DISTINCT" if self.rng.random() < distinct else "") + " *"
            return list(pool)
        self.select = "SELECT" + (" DISTINCT" if self.rng.random() < distinct else "") + " " + " ".join(chosen)
        return chosen


def _streams_for(rng: random.Random, count: int) -> list[URIRef]:
    return rng.sample([S1, S2, S3], count)


def _predicates(streams: list[URIRef], static: bool) -> list[str]:
    found: list[str] = []
    for stream in streams:
        found.extend(STREAM_PREDICATES[stream])
    if static:
        found.extend(["s", "val", "name", "p"])
    return list(dict.fromkeys(found))


# --- categories ----------------------------------------------------------------------------------------------


def q_bgp(b: _Builder) -> None:
    rng = b.rng
    shape = rng.choice(["stream", "static", "mixed", "mixed"])
    if shape == "static":
        predicates = ["s", "val", "name", "p"]
        if rng.random() < 0.3:
            b.datasets.append("FROM <http://example.org/g1>")
            predicates = ["t", "val"]
    else:
        streams = _streams_for(rng, 1)
        b.stream(streams[0])
        predicates = _predicates(streams, shape == "mixed")
        if shape == "mixed" and rng.random() < 0.2:
            b.datasets.append("FROM <http://example.org/g1>")
            predicates = _predicates(streams, False) + ["t", "val"]
    b.where += b.gen.bgp(predicates, rng.randint(1, 3))
    b.maybe_filter(0.3)
    b.select_some()


def q_filter(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, 1)
    b.stream(streams[0])
    b.where += b.gen.bgp(_predicates(streams, rng.random() < 0.6), rng.randint(1, 3))
    for _ in range(rng.randint(1, 2)):
        b.where.append(f"FILTER ({b.gen.condition()})")
    if rng.random() < 0.3:
        numbers = b.gen.vars_of("int") + b.gen.vars_of("num")
        if numbers:
            v = rng.choice(numbers)
            b.where.append(f"BIND ({v} * 2 + 1 AS ?computed)")
            b.gen.kinds["?computed"] = "num"
    b.select_some()


def q_optional(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, 1)
    b.stream(streams[0])
    predicates = _predicates(streams, True)
    b.where += b.gen.bgp(predicates, rng.randint(1, 2))
    certain = set(b.gen.certain)
    for _ in range(rng.randint(1, 2)):
        inner = b.gen.bgp(predicates, rng.randint(1, 2), certain=False)
        if rng.random() < 0.4:
            inner.append(f"FILTER ({b.gen.condition()})")
        b.where.append("OPTIONAL " + _group(inner, "    ").replace("\n}", "\n  }"))
    optional_vars = [v for v in b.gen.kinds if v not in certain]
    if optional_vars and rng.random() < 0.5:
        v = rng.choice(optional_vars)
        b.where.append(f"FILTER ({'!' if rng.random() < 0.5 else ''}BOUND({v}))")
    else:
        b.maybe_filter(0.3)
    b.select_some()


def q_union(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([1, 2]))
    for stream in streams:
        b.stream(stream)
    predicates = _predicates(streams, rng.random() < 0.5)
    b.where += b.gen.bgp(predicates, 1)
    left = b.gen.bgp(predicates, rng.randint(1, 2), certain=False)
    right = b.gen.bgp(predicates, rng.randint(1, 2), certain=False)
    if rng.random() < 0.3:
        right.append(f"FILTER ({b.gen.condition()})")
    b.where.append(_group(left, "    ").replace("\n}", "\n  }") + " UNION " + _group(right, "    ").replace("\n}", "\n  }"))
    b.maybe_filter(0.3)
    b.select_some()


def q_minus(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, 1)
    b.stream(streams[0])
    predicates = _predicates(streams, True)
    b.where += b.gen.bgp(predicates, rng.randint(1, 2))
    certain = set(b.gen.certain)
    if rng.random() < 0.7:
        inner = b.gen.bgp(predicates, rng.randint(1, 2), certain=False)
        b.where.append("MINUS " + _group(inner, "    ").replace("\n}", "\n  }"))
    else:
        inner = b.gen.bgp(predicates, rng.randint(1, 2), certain=False)
        keyword = rng.choice(["NOT EXISTS", "EXISTS"])
        b.where.append(f"FILTER {keyword} " + _group(inner, "    ").replace("\n}", "\n  }"))
    b.select_some(pool=[v for v in b.gen.kinds if v in certain])


def _aggregate_call(b: _Builder, certain: set[str]) -> tuple[str, str]:
    """(SPARQL 1.1 aggregate text, kind of its value)."""
    rng = b.rng
    numbers = [v for v in b.gen.vars_of("int") + b.gen.vars_of("num")]
    anything = list(b.gen.kinds)
    options = [("COUNT(*)", "int"), (f"COUNT({rng.choice(anything)})", "int"), (f"COUNT(DISTINCT {rng.choice(anything)})", "int")]
    if numbers:
        v = rng.choice(numbers)
        options += [(f"SUM({v})", "num"), (f"AVG({v})", "num"), (f"SUM({v} * 2)", "num")]
        bound = [n for n in numbers if n in certain]
        if bound:
            w = rng.choice(bound)
            options += [(f"MIN({w})", "num"), (f"MAX({w})", "num")]
    entities = [v for v in b.gen.vars_of("ent") if v in certain]
    if entities:
        options.append((f"MAX({rng.choice(entities)})", "ent"))
    return rng.choice(options)


def q_group(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, 1)
    b.stream(streams[0])
    predicates = _predicates(streams, rng.random() < 0.6)
    b.where += b.gen.bgp(predicates, rng.randint(1, 3))
    certain = set(b.gen.certain)
    if rng.random() < 0.3:
        b.where.append("OPTIONAL " + _group(b.gen.bgp(predicates, 1, certain=False), "    ").replace("\n}", "\n  }"))
    b.maybe_filter(0.3)
    keys = rng.sample(list(b.gen.kinds), rng.randint(0, min(2, len(b.gen.kinds))))
    items = list(keys)
    for i in range(rng.randint(1, 3)):
        call, _ = _aggregate_call(b, certain)
        items.append(f"({call} AS ?agg{i})")
    b.select = "SELECT " + " ".join(items)
    if keys:
        b.tail.append("GROUP BY " + " ".join(keys))
    if rng.random() < 0.4:
        call, _ = _aggregate_call(b, certain)
        b.tail.append(f"HAVING ({call} > {rng.randint(0, 3)})")


def q_aggregate_clause(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([1, 1, 2]))
    for stream in streams:
        b.stream(stream, physical=0.2)
    predicates = _predicates(streams, rng.random() < 0.7)
    b.where += b.gen.bgp(predicates, rng.randint(1, 3))
    certain = set(b.gen.certain)
    if rng.random() < 0.3:
        b.where.append("OPTIONAL " + _group(b.gen.bgp(predicates, 1, certain=False), "    ").replace("\n}", "\n  }"))
    b.maybe_filter(0.25)
    pool = list(b.gen.kinds)
    numbers = b.gen.vars_of("int") + b.gen.vars_of("num")
    clauses = []
    new_vars = []
    for i in range(rng.choice([1, 1, 2, 3])):
        groups = rng.sample(pool, rng.randint(1, min(2, len(pool))))
        options = ["COUNT", f"COUNT({rng.choice(pool)})", f"COUNT(DISTINCT {rng.choice(pool)})", "COUNT(*)"]
        if numbers:
            options += [f"SUM({rng.choice(numbers)})", f"AVG({rng.choice(numbers)})"]
            bound = [n for n in numbers if n in certain]
            if bound:
                options += [f"MIN({rng.choice(bound)})", f"MAX({rng.choice(bound)})"]
        function = rng.choice(options)
        name = f"?total-n{i}" if rng.random() < 0.3 else f"?a{i}"
        spelled = "{" + ", ".join(groups) + "}" if len(groups) > 1 or rng.random() < 0.7 else groups[0]
        clause = f"AGGREGATE {{ ({name}, {function}, {spelled})"
        if rng.random() < 0.5:
            threshold = rng.randint(1, 4)
            other = rng.choice(numbers) if numbers and function.startswith(("SUM", "AVG", "MIN", "MAX")) and rng.random() < 0.4 else None
            clause += f" FILTER ({name} >= {other if other else threshold})"
        clauses.append(clause + " }")
        new_vars.append(name)
    b.tail = clauses + b.tail
    shown = b.gen.projection(pool, rng.randint(1, 3))
    b.select = "SELECT " + ("DISTINCT " if rng.random() < 0.5 else "") + " ".join(shown + new_vars)


def q_timestamp(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([1, 2]))
    for stream in streams:
        b.stream(stream, physical=0.2)
    predicates = _predicates(streams, rng.random() < 0.5)
    b.where += b.gen.bgp(predicates, rng.randint(2, 3))
    stamped = list(b.gen.kinds)
    v, w = rng.choice(stamped), rng.choice(stamped)
    minute = rng.randint(2, 18)
    stream = rng.choice(streams)
    instant = f'"2024-01-01T00:{minute:02d}:00Z"^^xsd:dateTime'
    choice = rng.randint(0, 6)
    if choice == 0:
        b.where.append(f"FILTER (timestamp({v}) > {instant})")
    elif choice == 1:
        b.where.append(f"FILTER (timestamp({v}) >= timestamp({w}))")
    elif choice == 2:
        b.where.append(f"FILTER (timestamp({v}, {STREAM_NAMES[stream]}) <= {instant})")
    elif choice == 3:
        b.where.append(f"FILTER (!BOUND(?nothing) && timestamp({v}) < {instant} || {b.gen.condition()})")
    elif choice == 4:
        triple = rng.choice([t for t in b.where if t.endswith(" .")])
        s, p, o = triple[:-2].split(" ")
        b.where.append(f"FILTER (f:timestamp({s}, {p}, {o}) > {instant})")
    elif choice == 5:
        optional = b.gen.bgp(predicates, 1, certain=False)
        u = [x for x in b.gen.kinds if x not in stamped]
        b.where.append("OPTIONAL " + _group(optional, "    ").replace("\n}", "\n  }"))
        b.where.append(f"FILTER (!BOUND({u[0] if u else v}) || timestamp({v}) > {instant})")
    else:
        b.where.append(f"FILTER (timestamp({v}) != timestamp({w}) || {v} = {w})")
    shown = b.gen.projection(list(b.gen.kinds))
    extra = ""
    if rng.random() < 0.4:
        extra = f" (timestamp({rng.choice(stamped)}) AS ?when)"
    b.select = "SELECT " + ("DISTINCT " if rng.random() < 0.3 else "") + " ".join(shown) + extra


def q_physical(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([1, 2]))
    for stream in streams:
        b.stream(stream, physical=1.0)
    b.where += b.gen.bgp(_predicates(streams, rng.random() < 0.4), rng.randint(1, 2))
    b.maybe_filter(0.3)
    if rng.random() < 0.3:
        keys = b.gen.vars_of("ent")[:1]
        b.select = "SELECT " + " ".join(keys) + " (COUNT(*) AS ?count)"
        if keys:
            b.tail.append("GROUP BY " + " ".join(keys))
    else:
        b.select_some()


def q_streams(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([2, 3]))
    for stream in streams:
        b.stream(stream, physical=0.25)
    predicates = _predicates(streams, rng.random() < 0.4)
    b.where += b.gen.bgp(predicates, rng.randint(2, 3))
    b.maybe_filter(0.3)
    b.select_some()


def q_graph(b: _Builder) -> None:
    rng = b.rng
    shape = rng.randint(0, 4)
    if shape == 0:  # GRAPH <stream> over two default streams
        streams = _streams_for(rng, 2)
        for stream in streams:
            b.stream(stream)
        inner = b.gen.bgp(STREAM_PREDICATES[streams[0]], rng.randint(1, 2))
        b.where.append(f"GRAPH {STREAM_NAMES[streams[0]]} " + _group(inner, "    ").replace("\n}", "\n  }"))
        b.where += b.gen.bgp(_predicates(streams[1:], True), 1)
    elif shape == 1:  # FROM NAMED STREAM + GRAPH ?g binds the stream IRI
        streams = _streams_for(rng, 2)
        b.stream(streams[0], named=True)
        b.stream(streams[1], named=rng.random() < 0.5)
        inner = b.gen.bgp(["p", "q"], rng.randint(1, 2))
        b.where.append("GRAPH ?g " + _group(inner, "    ").replace("\n}", "\n  }"))
        b.gen.kinds["?g"] = "graph"
        if rng.random() < 0.4:
            b.where.append(f"FILTER (?g = {STREAM_NAMES[streams[1]]})")
    elif shape == 2:  # GRAPH <s1> { … } UNION GRAPH <s2> { … } (the C-SPARQL article, §5.8)
        streams = _streams_for(rng, 2)
        for stream in streams:
            b.stream(stream)
        subject = b.gen.var("ent")
        left = b.gen.bgp(["p", "q"], 1, certain=False)
        right = b.gen.bgp(["p", "q"], 1, certain=False)
        b.where.append(
            f"GRAPH {STREAM_NAMES[streams[0]]} " + _group(left, "    ").replace("\n}", "\n  }")
            + f" UNION GRAPH {STREAM_NAMES[streams[1]]} " + _group(right, "    ").replace("\n}", "\n  }")
        )
        b.where.append(b.gen.triple(["s", "val"], subject=subject))
    elif shape == 3:  # static named graphs
        named = rng.sample(["<http://example.org/g1>", "<http://example.org/g2>"], rng.choice([1, 2]))
        if rng.random() < 0.5:
            b.datasets += [f"FROM NAMED {g}" for g in named]
        inner = b.gen.bgp(["t"], rng.randint(1, 2))
        b.where.append("GRAPH ?g " + _group(inner, "    ").replace("\n}", "\n  }"))
        b.gen.kinds["?g"] = "graph"
        if rng.random() < 0.5:
            b.where += b.gen.bgp(["s", "val", "name"], 1)
    else:  # a stream window and static named graphs together under GRAPH ?g
        stream = rng.choice([S1, S2, S3])
        b.stream(stream, named=True)
        b.datasets.append("FROM NAMED <http://example.org/g1>")
        b.datasets.append("FROM <http://example.org/g2>")
        inner = b.gen.bgp(["p", "t"], 1)
        b.where.append("GRAPH ?g " + _group(inner, "    ").replace("\n}", "\n  }"))
        b.gen.kinds["?g"] = "graph"
        b.where += b.gen.bgp(["t", "name"], 1)
    b.maybe_filter(0.2, only={v for v, k in b.gen.kinds.items() if k != "graph"})
    b.select_some()


def q_modifiers(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, rng.choice([1, 2]))
    for stream in streams:
        b.stream(stream, physical=0.2)
    predicates = [p for p in _predicates(streams, False) if p != "r"]
    b.where += b.gen.bgp(predicates, rng.randint(1, 2))
    b.maybe_filter(0.3)
    pool = list(b.gen.kinds)
    chosen = b.gen.projection(pool)
    directions = [f"{'DESC' if rng.random() < 0.4 else 'ASC'}({v})" if rng.random() < 0.6 else v for v in chosen]
    rng.shuffle(directions)
    b.select = "SELECT " + ("DISTINCT " if rng.random() < 0.6 else "") + " ".join(chosen)
    b.tail.append("ORDER BY " + " ".join(directions))
    if rng.random() < 0.7:
        b.tail.append(f"LIMIT {rng.randint(1, 6)}")
        if rng.random() < 0.3:
            b.tail.append(f"OFFSET {rng.randint(1, 3)}")


def q_forms(b: _Builder) -> None:
    rng = b.rng
    streams = _streams_for(rng, 1)
    b.stream(streams[0])
    predicates = _predicates(streams, rng.random() < 0.5)
    b.where += b.gen.bgp(predicates, rng.randint(1, 2))
    b.maybe_filter(0.4)
    choice = rng.randint(0, 5)
    if choice == 0:
        b.select = "ASK"
    elif choice == 4:
        entities = b.gen.vars_of("ent")
        b.select = "DESCRIBE " + (entities[0] if entities else "ex:e1")
    elif choice == 5:
        b.select = f"DESCRIBE ex:e{rng.randint(0, 5)} ex:e{rng.randint(0, 5)}"
        b.where = ["?anything ex:s ?other ."]
    elif choice == 1:
        triples = [t for t in b.where if t.endswith(" .")]
        template = " ".join(t.replace(" ex:", " ex:out-", 1) for t in triples[:2])
        if rng.random() < 0.3:
            entity = b.gen.vars_of("ent")[0]
            template += f" _:n ex:about {entity} ."
        b.select = "CONSTRUCT { " + template + " }"
    elif choice == 2:
        b.select = "CONSTRUCT { " + " ".join(t for t in b.where if t.endswith(" .")) + " }"
    else:
        entities = b.gen.vars_of("ent")
        b.select = ("SELECT " + " ".join(entities[:2]) + " (COUNT(*) AS ?n)") if entities else "SELECT (COUNT(*) AS ?n)"
        if entities:
            b.tail.append("GROUP BY " + " ".join(entities[:2]))
            b.tail.append("ORDER BY DESC(?n) " + " ".join(entities[:2]))


CATEGORIES = {
    "bgp": q_bgp,
    "filter": q_filter,
    "optional": q_optional,
    "union": q_union,
    "minus": q_minus,
    "group": q_group,
    "aggregate": q_aggregate_clause,
    "timestamp": q_timestamp,
    "physical": q_physical,
    "streams": q_streams,
    "graph": q_graph,
    "modifiers": q_modifiers,
    "forms": q_forms,
}
INSTANTS = [T0 + 10 * MINUTE, T0 + 12 * MINUTE + 30_000_000, T0 + 15 * MINUTE, T0 + 20 * MINUTE, T0 + 17 * MINUTE + 15_000_000]


def generate(seed: int) -> Case:
    """The query and data of one seed."""
    names = list(CATEGORIES)
    category = names[seed % len(names)]
    builder = _Builder(seed, category)
    CATEGORIES[category](builder)
    data = make_data(seed % DATA_SETS)
    at = INSTANTS[(seed // len(names)) % len(INSTANTS)]
    return Case(f"gen{seed:03d}-{category}", builder.text(), data.streams, data.graphs, at)


def generated_cases(seeds) -> list[Case]:
    return [generate(seed) for seed in seeds]
