"""The benchmark queries, each written once per system, and the window each evaluation reads.

A ``Workload`` is one query of the specification in every form the systems take:

- ``cquery``: the C-SPARQL text the engine registers — the example file itself, with only its stream IRI
  changed where the data set names the stream differently (07 and 16 read ``milantollgates`` as printed; 04
  reads the same tollgate stream);
- ``sparql``: the equivalent SPARQL 1.1 query a user of rdflib or pyoxigraph would write over the window's
  triples and the static graph (the window exported as the default graph, and as a named graph named by its
  stream for ``GRAPH <stream>``);
- ``spark``: a hand-written Spark DataFrame plan over the same Parquet files the engine reads;
- ``sql``: a hand-written DuckDB query over the same Parquet files.

A window is a set of triples (docs/semantics.md, *Logical windows* and *Physical windows*), so every hand-written form drops duplicate triples of a window
before matching, as the engine does; otherwise they compute what the query says with no generality: the
predicates are known, the static parts are small and broadcast, AGGREGATE's count per group is joined back.

Every form returns its answer as a ``Counter`` of rows of plain strings (``canonical_*``): IRIs as ``<iri>``,
numbers as their integer value, so that the answers of all systems can be compared as multisets.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rdflib import Literal, URIRef

from benchmarks import data
from csparql.storage.vocabulary import XSD_STRING
from csparql.examples import examples_folder
from csparql.core.windows import format_instant

EXAMPLES = examples_folder("queries")
REGISTERS = data.T + "registers"
PLACED_IN = data.C + "placedIn"
CONTAINS = data.C + "contains"
HAS_CAPACITY = data.C + "hasCapacity"
PLACED_AT = data.C + "placedAt"
CROSSING = data.C + "crossing"
TOPIC = data.SIOC + "topic"
ENTERING = data.T + "has-entering-cars"

Answer = Counter


@dataclass(frozen=True)
class StreamSlice:
    """What one stream contributes to an evaluation: the Parquet files the engine's pruning keeps, and the
    window's bounds (``count`` for a physical window, else ``start``)."""

    iri: str
    files: tuple[str, ...]
    end: int
    start: int | None = None
    count: int | None = None
    records: int | None = None  # triples the files hold, from the Delta log


@dataclass(frozen=True)
class WindowFiles:
    """The files of one evaluation: each stream's slice and the files of the static graphs in its default
    graph."""

    at: int
    streams: dict[str, StreamSlice]
    static: tuple[str, ...]

    def stream(self, iri: str) -> StreamSlice:
        return self.streams[iri]


@dataclass(frozen=True)
class Workload:
    """One benchmark query in every system's form (see the module docstring)."""

    name: str
    title: str
    dataset: str
    form: str  # "select" or "construct"
    source: str  # the example file it comes from
    cquery: str
    sparql: str
    spark: Callable  # (spark, WindowFiles) -> pyarrow.Table
    sql: Callable[[WindowFiles], str]
    canonical: Callable  # pyarrow.Table -> Answer
    graphs: tuple[str, ...] = ()  # streams whose window is also exported as a named graph
    notes: str = ""
    tolerance: float | None = None  # numbers compared with this relative tolerance (None: exactly)
    parameters: dict = field(default_factory=dict)


def example(name: str) -> str:
    """The text of an example query, without its comment header."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


# --- canonical answers ------------------------------------------------------------------------------------


def canonical_value(value) -> str:
    """A result value as a plain string: an rdflib term, or what DuckDB/Spark/pyoxigraph return."""
    if value is None:
        return "UNBOUND"
    if isinstance(value, URIRef):
        return f"<{value}>"
    if isinstance(value, Literal):
        python = value.toPython()
        if isinstance(python, (int, float)) and not isinstance(python, bool):
            return _number(python)
        return str(value)
    if isinstance(value, dict):  # a stored term struct
        if value.get("kind") == 1:
            return f"<{value['value']}>"
        return _number(value["value"]) if _numeric(value["value"]) else value["value"]
    if isinstance(value, (int, float)):
        return _number(value)
    text = str(value)
    return text


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _numeric(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?\d+(\.\d*)?", str(text)))


def _number(value) -> str:
    number = float(value)
    return str(int(number)) if number == int(number) else repr(number)


def answer_of_rows(rows) -> Answer:
    """The multiset of rows, each a tuple of canonical values."""
    return Counter(tuple(canonical_value(v) for v in row) for row in rows)


def answer_of_table(table, columns: tuple[str, ...]) -> Answer:
    """The multiset of an Arrow table's rows (IRI columns hold plain IRI strings or term structs)."""
    lists = [table.column(c).to_pylist() for c in columns]
    rows = []
    for values in zip(*lists):
        rows.append(tuple(v if isinstance(v, (dict, int, float)) or v is None else URIRef(v) for v in values))
    return answer_of_rows(rows)


def answer_of_triples(triples) -> Answer:
    """A graph as a set of canonical triples (each counted once)."""
    return Counter({tuple(canonical_value(t) for t in triple): 1 for triple in set(map(tuple, triples))})


# --- Spark helpers ----------------------------------------------------------------------------------------


def _spark_window(spark, piece: StreamSlice):
    """The window's triples as a set (s, p, o), read from exactly the slice's files."""
    from pyspark.sql import functions as F

    from csparql.spark.schema import STREAM_FILE_SCHEMA

    frame = spark.read.schema(STREAM_FILE_SCHEMA).parquet(*piece.files)
    end = F.timestamp_micros(F.lit(piece.end))
    if piece.count is None:
        frame = frame.where((F.col("ts") > F.timestamp_micros(F.lit(piece.start))) & (F.col("ts") <= end))
    else:
        frame = frame.where(F.col("ts") <= end).orderBy(F.col("ts").desc(), F.col("arrival").desc()).limit(piece.count)
    return frame.select("s", "p", "o").distinct()


def _spark_static(spark, window: WindowFiles):
    from csparql.spark.schema import STATIC_FILE_SCHEMA

    return spark.read.schema(STATIC_FILE_SCHEMA).parquet(*window.static)


def _with_predicate(frame, iri: str, subject: str, object_: str):
    from pyspark.sql import functions as F

    return frame.where((F.col("p.kind") == 1) & (F.col("p.value") == iri)).select(
        F.col("s").alias(subject), F.col("o").alias(object_))


def _district_counts_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    passages = _with_predicate(_spark_window(spark, window.stream(data.MILAN_TOLLGATES)), REGISTERS, "tollgate", "car")
    static = _spark_static(spark, window)
    placed = _with_predicate(static, PLACED_IN, "tollgate", "street")
    contains = _with_predicate(static, CONTAINS, "district", "street")
    joined = passages.join(F.broadcast(placed), "tollgate").join(F.broadcast(contains), "street")
    return joined.groupBy("district").agg(F.count(F.lit(1)).alias("passages"))


def district_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    counts = _district_counts_spark(spark, window)
    return counts.select(F.col("district.value").alias("district"), "passages").toArrow()


def construct_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    counts = _district_counts_spark(spark, window)
    return counts.select(F.col("district.value").alias("s"), F.lit(ENTERING).alias("p"),
                         F.col("passages").alias("o")).toArrow()


def topics_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    posts = _with_predicate(_spark_window(spark, window.stream(data.INTERACTIONS)), TOPIC, "post", "topic")
    return posts.groupBy(F.col("topic.value").alias("topic")).agg(F.count(F.lit(1)).alias("number")).toArrow()


def topic_set_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    posts = _with_predicate(_spark_window(spark, window.stream(data.INTERACTIONS)), TOPIC, "post", "topic")
    return posts.select(F.col("topic.value").alias("topic")).distinct().toArrow()


def physical_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    passages = _with_predicate(_spark_window(spark, window.stream(data.MILAN_TOLLGATES)), REGISTERS, "tollgate", "car")
    return passages.groupBy(F.col("tollgate.value").alias("tollgate")).agg(F.count("car").alias("passages")).toArrow()


def two_streams_spark(spark, window: WindowFiles):
    from pyspark.sql import functions as F

    gates = _spark_window(spark, window.stream(data.CITY_TOLLGATES))
    cams = _spark_window(spark, window.stream(data.CITY_CAMERAS))
    through_gates = _with_predicate(gates, REGISTERS, "agent", "car").join(
        _with_predicate(gates, PLACED_IN, "agent", "street"), "agent").select("street")
    through_cams = (_with_predicate(cams, REGISTERS, "agent", "car")
                    .join(_with_predicate(cams, PLACED_AT, "agent", "light"), "agent")
                    .join(_with_predicate(cams, CROSSING, "light", "street"), "light").select("street"))
    capacity = _with_predicate(_spark_static(spark, window), HAS_CAPACITY, "street", "capacity").select(
        "street", F.col("capacity.value").cast("long").alias("capacity"))
    solutions = through_gates.unionAll(through_cams).join(F.broadcast(capacity), "street")
    counts = solutions.groupBy("street").agg(F.count(F.lit(1)).alias("passages"))
    # ?passages > 0.8 * ?capacity, exactly: 5 · passages > 4 · capacity
    kept = solutions.join(counts, "street").where(F.col("passages") * 5 > F.col("capacity") * 4)
    return kept.select(F.col("street.value").alias("street"), "passages").toArrow()


# --- DuckDB ---------------------------------------------------------------------------------------------------


def _files(files) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def sql_window(piece: StreamSlice) -> str:
    """The window's triples as a set, from exactly the slice's files."""
    source = f"read_parquet({_files(piece.files)})"
    if piece.count is None:
        return (f"SELECT DISTINCT s, p, o FROM {source} WHERE ts > make_timestamp({piece.start}) "
                f"AND ts <= make_timestamp({piece.end})")
    return (f"SELECT DISTINCT s, p, o FROM (SELECT s, p, o FROM {source} WHERE ts <= make_timestamp({piece.end}) "
            f"ORDER BY ts DESC, arrival DESC LIMIT {piece.count})")


def _pred(iri: str) -> str:
    return f"p.kind = 1 AND p.value = '{iri}'"


def district_sql(window: WindowFiles) -> str:
    return f"""
WITH w AS ({sql_window(window.stream(data.MILAN_TOLLGATES))}),
     st AS (SELECT s, p, o FROM read_parquet({_files(window.static)})),
     passages AS (SELECT s AS tollgate, o AS car FROM w WHERE {_pred(REGISTERS)}),
     placed AS (SELECT s AS tollgate, o AS street FROM st WHERE {_pred(PLACED_IN)}),
     contains AS (SELECT s AS district, o AS street FROM st WHERE {_pred(CONTAINS)})
SELECT contains.district.value AS district, count(*) AS passages
FROM passages JOIN placed USING (tollgate) JOIN contains USING (street)
GROUP BY contains.district.value"""


def construct_sql(window: WindowFiles) -> str:
    return f"SELECT district AS s, '{ENTERING}' AS p, passages AS o FROM ({district_sql(window)})"


def topics_sql(window: WindowFiles) -> str:
    return f"""
WITH w AS ({sql_window(window.stream(data.INTERACTIONS))})
SELECT o.value AS topic, count(*) AS number FROM w WHERE {_pred(TOPIC)} GROUP BY o.value"""


def topic_set_sql(window: WindowFiles) -> str:
    return f"""
WITH w AS ({sql_window(window.stream(data.INTERACTIONS))})
SELECT DISTINCT o.value AS topic FROM w WHERE {_pred(TOPIC)}"""


def physical_sql(window: WindowFiles) -> str:
    return f"""
WITH w AS ({sql_window(window.stream(data.MILAN_TOLLGATES))})
SELECT s.value AS tollgate, count(o) AS passages FROM w WHERE {_pred(REGISTERS)} GROUP BY s.value"""


def two_streams_sql(window: WindowFiles) -> str:
    return f"""
WITH gates AS ({sql_window(window.stream(data.CITY_TOLLGATES))}),
     cams AS ({sql_window(window.stream(data.CITY_CAMERAS))}),
     capacity AS (SELECT s AS street, CAST(o.value AS BIGINT) AS capacity
                  FROM read_parquet({_files(window.static)}) WHERE {_pred(HAS_CAPACITY)}),
     through_gates AS (SELECT pl.o AS street FROM gates r JOIN gates pl ON r.s = pl.s
                       WHERE r.p.kind = 1 AND r.p.value = '{REGISTERS}' AND pl.p.kind = 1 AND pl.p.value = '{PLACED_IN}'),
     through_cams AS (SELECT cr.o AS street FROM cams r JOIN cams pa ON r.s = pa.s JOIN cams cr ON pa.o = cr.s
                      WHERE r.p.kind = 1 AND r.p.value = '{REGISTERS}' AND pa.p.kind = 1 AND pa.p.value = '{PLACED_AT}'
                        AND cr.p.kind = 1 AND cr.p.value = '{CROSSING}'),
     solutions AS (SELECT street, capacity FROM (SELECT street FROM through_gates UNION ALL SELECT street FROM through_cams)
                   JOIN capacity USING (street)),
     counts AS (SELECT street, count(*) AS passages FROM solutions GROUP BY street)
SELECT solutions.street.value AS street, passages FROM solutions JOIN counts USING (street)
WHERE passages * 5 > capacity * 4"""


# --- SPARQL 1.1 (rdflib, pyoxigraph) ------------------------------------------------------------------------

PREFIXES = "PREFIX c: <http://linkedurbandata.org/city#>\nPREFIX t: <http://linkedurbandata.org/traffic#>\n"

DISTRICT_SPARQL = PREFIXES + """SELECT ?district (COUNT(*) AS ?passages)
WHERE { ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street .
        ?district c:contains ?street . }
GROUP BY ?district
"""

CONSTRUCT_SPARQL = PREFIXES + """CONSTRUCT { ?district t:has-entering-cars ?passages }
WHERE { { SELECT ?district (COUNT(*) AS ?passages)
          WHERE { ?tollgate t:registers ?car .
                  ?district c:contains ?street .
                  ?tollgate c:placedIn ?street . }
          GROUP BY ?district } }
"""

TOPICS_SPARQL = """PREFIX sioc: <http://rdfs.org/sioc/ns#>
SELECT ?topic (COUNT(*) AS ?number)
WHERE { ?post sioc:topic ?topic . }
GROUP BY ?topic
"""

TOPIC_SET_SPARQL = """PREFIX sioc: <http://rdfs.org/sioc/ns#>
SELECT DISTINCT ?topic
WHERE { ?post sioc:topic ?topic . }
"""

PHYSICAL_SPARQL = """PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?tollgate (COUNT(?car) AS ?passages)
WHERE { ?tollgate t:registers ?car . }
GROUP BY ?tollgate
"""

_TWO_STREAMS_BODY = f"""?street c:hasCapacity ?capacity .
    {{ GRAPH <{data.CITY_TOLLGATES}> {{ ?tollgate t:registers ?car . ?tollgate c:placedIn ?street . }} }}
    UNION
    {{ GRAPH <{data.CITY_CAMERAS}> {{ ?camera t:registers ?car . ?camera c:placedAt ?light . ?light c:crossing ?street . }} }}"""

TWO_STREAMS_SPARQL = PREFIXES + f"""SELECT ?street ?passages
WHERE {{
    {_TWO_STREAMS_BODY}
    {{ SELECT ?street (COUNT(*) AS ?passages) WHERE {{ {_TWO_STREAMS_BODY} }} GROUP BY ?street }}
    FILTER (?passages > (0.8 * ?capacity))
}}
"""


# --- the workloads -------------------------------------------------------------------------------------------


def _select(*columns: str):
    return lambda table: answer_of_table(table, columns)


def _construct(table) -> Answer:
    rows = zip(table.column("s").to_pylist(), table.column("p").to_pylist(), table.column("o").to_pylist())
    return answer_of_triples((URIRef(s), URIRef(p), o) for s, p, o in rows)


def district_count() -> Workload:
    return Workload(
        "district_count", "cars per district (04)", "urban", "select", "04-cars-per-district.rq",
        example("04-cars-per-district.rq").replace(data.CITY_TOLLGATES, data.MILAN_TOLLGATES),
        DISTRICT_SPARQL, district_spark, district_sql, _select("district", "passages"),
        notes="04 as printed, over the tollgate stream of 07 (same triples, another IRI)",
    )


def construct_stream() -> Workload:
    return Workload(
        "construct_stream", "REGISTER STREAM CONSTRUCT (07)", "urban", "construct", "07-register-stream-construct.rq",
        example("07-register-stream-construct.rq").replace("REGISTER STREAM", "REGISTER QUERY"),
        CONSTRUCT_SPARQL, construct_spark, construct_sql, _construct,
        notes="07's CONSTRUCT registered as a QUERY: the same graph per window, kept in a result table instead "
              "of an output stream, so every evaluation reads the same input",
    )


def topic_count(step: str = "10s") -> Workload:
    text = example("15-topic-counts-3m-every-10s.rq")
    if step != "10s":
        text = text.replace("STEP 10s", f"STEP {step}")
    return Workload(
        "topic_count", "topics in 3 minutes (social-data paper, example 15)", "topics", "select", "15-topic-counts-3m-every-10s.rq",
        text, TOPICS_SPARQL, topics_spark, topics_sql, _select("topic", "number"), parameters={"step": step},
    )


def topic_set(step: str = "10s") -> Workload:
    """The topics of the last 3 minutes, without their counts: the topic count's window and pattern under a
    DISTINCT projection, whose pane partials are the pane's distinct topics (not keyed: a few rows a pane)."""
    text = TOPIC_SET_CQUERY.replace("STEP 10s", f"STEP {step}")
    return Workload(
        "topic_set", "distinct topics in 3 minutes (15 without its AGGREGATE)", "topics", "select",
        "15-topic-counts-3m-every-10s.rq", text, TOPIC_SET_SPARQL, topic_set_spark, topic_set_sql, _select("topic"),
        parameters={"step": step},
        notes="the topic count's stream and window, SELECT DISTINCT ?topic: the pane path's non-keyed shape",
    )


TOPIC_SET_CQUERY = """REGISTER QUERY DistinctTopics AS
PREFIX sioc: <http://rdfs.org/sioc/ns#>
SELECT DISTINCT ?topic
FROM STREAM <http://getglue.com/interactions.trdf> [ RANGE 3m STEP 10s ]
WHERE { ?post sioc:topic ?topic . }
"""


def physical_window(count: int) -> Workload:
    text = example("16-physical-window.rq").replace("[TRIPLES 1000]", f"[TRIPLES {count}]")
    return Workload(
        "physical_window", "last n passages (TRIPLES n, 16)", "urban", "select", "16-physical-window.rq",
        text, PHYSICAL_SPARQL, physical_spark, physical_sql, _select("tollgate", "passages"),
        parameters={"count": count},
    )


def two_streams() -> Workload:
    return Workload(
        "two_streams", "full streets, two streams (08)", "two_streams", "select", "08-full-streets-two-streams.rq",
        example("08-full-streets-two-streams.rq"), TWO_STREAMS_SPARQL, two_streams_spark, two_streams_sql,
        _select("street", "passages"), graphs=(data.CITY_TOLLGATES, data.CITY_CAMERAS),
    )


def topic_filter_query(window: WindowFiles) -> str:
    """The social-data paper's alternative: the whole stored stream (a window reaching back past every triple, so no file is
    pruned) with a FILTER on the timestamp selecting the same interval as the window of 15."""
    piece = window.stream(data.INTERACTIONS)
    start, end = format_instant(piece.start), format_instant(piece.end)
    return f"""REGISTER QUERY TopicCountByFilter AS
PREFIX sioc: <http://rdfs.org/sioc/ns#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
SELECT DISTINCT ?topic ?number
FROM STREAM <{data.INTERACTIONS}> [RANGE 36500d STEP 10s]
WHERE {{ ?post sioc:topic ?topic .
        FILTER (timestamp(?post) > "{start}"^^xsd:dateTime && timestamp(?post) <= "{end}"^^xsd:dateTime) }}
AGGREGATE {{ (?number, COUNT, {{?topic}}) }}
"""


def window_files(plan, warehouse, at: int) -> WindowFiles:
    """The files and bounds of the evaluation of ``plan`` at ``at``: the engine's own choice of files
    (``csparql.storage.pruning.select_window_files`` / ``select_latest_files`` over the Delta log), which every
    system then reads, and
    the files of the static graphs in the query's default graph (its FROM graphs, else the default static
    graph; a graph never loaded has none)."""
    from csparql.core.algebra.operators import StaticGraph
    from csparql.storage.pruning import select_latest_files, select_window_files
    from csparql.core.schedule import evaluation_at
    from csparql.storage import delta
    from csparql.core.windows import LogicalWindow

    evaluation = evaluation_at(plan, at)
    windows = {str(s.iri): s.window for s in plan.streams}
    streams = {}
    for iri, bounds in evaluation.streams.items():
        path = warehouse.stream(str(iri))
        files = delta.live_files(delta.open_table(path), path)
        window = windows[str(iri)]
        if isinstance(window, LogicalWindow):
            chosen = select_window_files(files, bounds)
            streams[str(iri)] = StreamSlice(str(iri), tuple(f.uri for f in chosen), bounds.end, bounds.start,
                                            records=_records(chosen))
        else:
            chosen = select_latest_files(files, bounds.end, window.count)
            streams[str(iri)] = StreamSlice(str(iri), tuple(f.uri for f in chosen), bounds.end, count=window.count,
                                            records=_records(chosen))
    static = []
    for source in plan.dataset.default:
        if isinstance(source, StaticGraph):
            path = warehouse.static(None if source.iri is None else str(source.iri))
            if delta.exists(path):
                static += [f.uri for f in delta.live_files(delta.open_table(path), path)]
    return WindowFiles(at, streams, tuple(static))


def _records(files) -> int | None:
    return None if any(f.records is None for f in files) else sum(f.records for f in files)


def ntriples_line() -> str:
    """DuckDB SQL of one triple's N-Triples line (without its final `` .``), from its columns s, p, o."""

    def term(column: str) -> str:
        literal = (f"'\"' || replace(replace(replace(replace({column}.value, '\\', '\\\\'), '\"', '\\\"'), chr(10), "
                   f"'\\n'), chr(13), '\\r') || '\"' || CASE WHEN {column}.language IS NOT NULL THEN '@' || "
                   f"{column}.language WHEN {column}.datatype IS NULL OR {column}.datatype = "
                   f"'{XSD_STRING}' THEN '' ELSE '^^<' || {column}.datatype || '>' END")
        return (f"CASE {column}.kind WHEN 1 THEN '<' || {column}.value || '>' WHEN 2 THEN '_:' || {column}.value "
                f"ELSE {literal} END")

    return f"{term('s')} || ' ' || {term('p')} || ' ' || {term('o')}"


def ntriples_sql(window: WindowFiles, graphs: tuple[str, ...] = ()) -> str:
    """DuckDB SQL giving the evaluation's dataset as N-Quads lines: every window's triples and the static
    graph in the default graph (docs/semantics.md, *The dataset of an evaluation*), and each stream in ``graphs`` again in a graph named by it."""
    line = ntriples_line()
    parts = [f"SELECT s, p, o FROM ({sql_window(piece)})" for piece in window.streams.values()]
    if window.static:
        parts.append(f"SELECT s, p, o FROM read_parquet({_files(window.static)})")
    default = f"SELECT {line} || ' .' AS line FROM (" + " UNION ".join(parts) + ")"
    named = [f"SELECT {line} || ' <{iri}> .' AS line FROM ({sql_window(window.stream(iri))})" for iri in graphs]
    return " UNION ALL ".join([default, *named])


def export_dataset(connection, window: WindowFiles, graphs: tuple[str, ...], path: Path) -> int:
    """Write the evaluation's dataset as N-Quads (N-Triples when it has no named graph); the line count."""
    lines = connection.sql(ntriples_sql(window, graphs)).to_arrow_table().column("line").to_pylist()
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines))
        out.write("\n")
    return len(lines)


# --- SRBench (004) ---------------------------------------------------------------------------------------------

SRBENCH_QUERIES = (1, 4, 10, 12)
"""The SRBench queries the benchmark measures (at least these four)."""
SRBENCH_WINDOW_HOUR = {1: 6, 4: 3, 10: 24, 12: 3}
"""Per query, the hour of the generated scenario (``csparql.srbench.generator.Scenario``, 30 hours) whose
window is measured: one with answers (the same hours as ``tests/srbench``'s windows with answers)."""
SRBENCH_TOLERANCE = 1e-5
"""Averages of xsd:float values are compared with this relative tolerance: pyoxigraph averages them in single
precision, the engine in double precision, rdflib in decimal (40.52667, 40.5266685, 40.5266667)."""


def srbench_sparql(cquery: str) -> str:
    """The SPARQL 1.1 form of an SRBench query in C-SPARQL: without ``REGISTER … AS`` and the ``FROM``
    clauses (the exported window and the FROM graphs are the default graph: docs/semantics.md, *The dataset of an evaluation*). The four measured
    queries use nothing else of C-SPARQL (no timestamp(), AGGREGATE, entailment or ISTREAM)."""
    kept = [line for line in cquery.splitlines()
            if not line.lstrip().upper().startswith(("REGISTER ", "FROM "))]
    return "\n".join(kept) + "\n"


def srbench(number: int) -> Workload:
    """SRBench query ``number`` as registered (``examples/srbench``), and its SPARQL 1.1 form."""
    from csparql.core.frontend import compile_query
    from csparql.srbench import query_files
    from csparql.srbench.vocabulary import OBSERVATIONS

    path = next(p for p in query_files() if p.name.startswith(f"q{number:02d}-"))
    text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                     if not line.startswith("#")).strip() + "\n"
    if compile_query(text).entailment:
        raise ValueError(f"{path.name} needs entailment, which the SPARQL 1.1 form does not express")
    return Workload(
        f"srbench_q{number:02d}", f"SRBench Q{number} ({path.stem[4:].replace('-', ' ')})", "srbench", "select",
        f"srbench/{path.name}", text, srbench_sparql(text), None, None, None,
        notes=f"over {OBSERVATIONS}", tolerance=SRBENCH_TOLERANCE,
        parameters={"query": number, "hour": SRBENCH_WINDOW_HOUR[number]},
    )


def agree(answer: Answer, reference: Answer, tolerance: float | None = None) -> bool:
    """Whether two answers are the same multiset of rows; with a ``tolerance``, numbers in the same position
    may differ by that much relative to the reference's (each row of one matched with a row of the other)."""
    if answer == reference or tolerance is None:
        return answer == reference
    if sum(answer.values()) != sum(reference.values()):
        return False
    unmatched = list(reference.elements())
    for row in answer.elements():
        match = next((i for i, other in enumerate(unmatched) if _close(row, other, tolerance)), None)
        if match is None:
            return False
        unmatched.pop(match)
    return True


def _close(row: tuple, other: tuple, tolerance: float) -> bool:
    if len(row) != len(other):
        return False
    for value, expected in zip(row, other):
        if value == expected:
            continue
        if not (_NUMBER.fullmatch(value) and _NUMBER.fullmatch(expected)):
            return False
        if abs(float(value) - float(expected)) > tolerance * max(abs(float(expected)), 1e-300):
            return False
    return True


ALL = {
    "district_count": district_count,
    "construct_stream": construct_stream,
    "topic_count": topic_count,
    "topic_set": topic_set,
    "physical_window": physical_window,
    "two_streams": two_streams,
}
