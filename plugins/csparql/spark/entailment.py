"""Entailment regimes on Spark: triple patterns matched against the entailed graph, by rewriting.

A registered query may switch on ``ENTAILMENT RDFS`` and ``ENTAILMENT SAMEAS`` (docs/entailment.md). The
*ontology* is what the static graphs of the query's default graph (its ``FROM`` graphs, or the default static
graph) state with ``rdfs:subClassOf``, ``rdfs:subPropertyOf`` and ``owl:sameAs``. From it come three
closures, each computed once per version of those graphs and kept in the reader's ``ClosureStore``
(``csparql.spark.closures``): SC, the pairs ``c rdfs:subClassOf+ d``; SP, the pairs ``p rdfs:subPropertyOf+
q``; and EQ, the pairs of terms linked by ``(owl:sameAs|^owl:sameAs)+`` (every pair of one equality class,
each member paired with itself too).

The entailed graph of a graph S (a stream window or a static graph that a pattern reads) holds, for every
triple (s, p, o) of S (Sup(p) is p and its super-properties by SP, Sup(p) = {p} for the schema vocabulary
rdf:type, rdfs:subClassOf, rdfs:subPropertyOf and owl:sameAs):

- RDFS: (s, q, o) for every q in Sup(p) (rdfs7); (s, rdf:type, d) when rdf:type is in Sup(p), for every d
  above o by SC (rdfs9); (s, rdfs:subClassOf, d) when rdfs:subClassOf is in Sup(p), d above o by SC (rdfs11);
  (s, rdfs:subPropertyOf, r) when rdfs:subPropertyOf is in Sup(p), r above o by SP (rdfs5);
- SAMEAS: every triple of the above (or of S) with its subject and its object each replaced by any term
  of its equality class (eq-rep-s, eq-rep-o; with EQ, this gives eq-sym and eq-trans too).

Nothing is materialised. A pattern's constants become filters on the stored triples, computed on the driver
from the closures (held there once per evaluation when small, and kept per process by the closures' keys) (a pattern ``?x a weather:PrecipitationObservation`` reads the stored triples whose
predicate is rdf:type or one of its sub-properties and whose object is a sub-class of PrecipitationObservation),
so an entailed pattern reads what the plain pattern reads, plus a few more values in the same filter. Only a
variable class, property or term is expanded, by a join with the (small, broadcast) closure. An inferred
triple keeps the timestamp of the stored triple it is inferred from.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from rdflib import URIRef, Variable

from csparql.core.algebra import operators as alg
from csparql.core.language import syntax as sx
from csparql.core.optimizer.entailment import entailed_statistics
from csparql.core.optimizer.statistics import SourceStatistics
from csparql.spark.frames import SourceFrames, term_literal
from csparql.spark.paths import PathEvaluator
from csparql.spark.terms import constant
from csparql.storage import vocabulary
from csparql.storage.terms import from_row, term_row

RDF_TYPE = URIRef(vocabulary.RDF_TYPE)
SUB_CLASS_OF = URIRef(vocabulary.RDFS_SUBCLASSOF)
SUB_PROPERTY_OF = URIRef(vocabulary.RDFS_SUBPROPERTYOF)
SAME_AS = URIRef(vocabulary.OWL_SAMEAS)
SCHEMA_VOCABULARY = (RDF_TYPE, SUB_CLASS_OF, SUB_PROPERTY_OF, SAME_AS)
RDFS, SAMEAS = "RDFS", "SAMEAS"
# Sets of constants up to this size are matched with literals in a filter; larger ones by a broadcast join.
LITERAL_SET = 64
COLUMNS = ["s", "p", "o", "ts", "arrival", "src"]
# What is closed: SC is rdfs:subClassOf+, SP rdfs:subPropertyOf+, EQ (owl:sameAs|^owl:sameAs)+.
CLOSED = {
    "SC": SUB_CLASS_OF,
    "SP": SUB_PROPERTY_OF,
    "EQ": sx.AlternativePath((SAME_AS, sx.InversePath(SAME_AS))),
}
# Closures of up to this many pairs are also held on the driver, where a pattern's constants are looked up.
DRIVER_PAIRS = 200_000
# Driver views are kept per process for this many closure keys (the most recent).
DRIVER_VIEWS_KEPT = 16
_DRIVER_VIEWS: dict[str, tuple] = {}
_DRIVER_VIEWS_LOCK = threading.Lock()  # evaluations may run in threads of one process (the triggerer's)


class Entailment:
    """The entailment regimes of one evaluation and the ontology they read (see the module docstring).

    ``frames`` reads the evaluation's sources as stored (no entailment): the closures are evaluated over
    them; ``statistics`` are the sources' statistics as stored (before ``statistics`` adjusts them);
    ``default_graph`` is the plan's default graph, whose static graphs are the ontology.
    """

    def __init__(self, frames: SourceFrames, statistics: SourceStatistics,
                 default_graph: tuple[alg.Source, ...], regimes: tuple[str, ...]):
        self.frames = frames
        self.stored_statistics = statistics
        self.spark = frames.spark
        self.rdfs = RDFS in regimes
        self.same_as = SAMEAS in regimes
        self.regimes = tuple(r for r in (RDFS, SAMEAS) if r in regimes)
        default = frames.expand(default_graph)
        self.ontology: tuple[alg.StaticGraph, ...] = tuple(s for s in default if isinstance(s, alg.StaticGraph))
        self.description = "(entailment " + " ".join(r.lower() for r in self.regimes) + ")"
        self._closures: dict[str, DataFrame] = {}
        self._keys: dict[str, object] = {}
        self._views: dict[str, dict | None] = {}
        self._supers: dict[URIRef, set[URIRef]] | None = None
        self._below: dict[tuple, list] = {}
        self._classes: dict[tuple, list] = {}

    # the closures of the ontology

    def _closure(self, name: str) -> DataFrame:
        """SC, SP or EQ as a frame of pairs (a, b), from the closure store when the reader keeps one."""
        if name not in self._closures:
            # the hierarchies are read from the statements as written (no entailment)
            evaluator = PathEvaluator(self.frames, self.stored_statistics, self.ontology, graph=False)
            try:
                pairs = evaluator.eval(sx.ModifiedPath(CLOSED[name], "+"), None).select("a", "b")
                if name == "SP":
                    pairs = pairs.where(~F.col("a").isin([constant(iri) for iri in SCHEMA_VOCABULARY]))
                self._closures[name] = pairs  # checkpoints, driver data or stored files: never the released links
                self._keys[name] = evaluator.closure_key(CLOSED[name], None)
            finally:
                evaluator.release()
        return self._closures[name]

    def _on_driver(self, name: str) -> dict[tuple, set[tuple]] | None:
        """SC, SP or EQ on the driver, by their second term (b → every a), or None when larger than
        ``DRIVER_PAIRS``. One small job per evaluation; none at all while the process evaluates again over the
        same versions of the ontology's graphs (the view is kept by the closure's key)."""
        if name not in self._views:
            frame = self._closure(name)
            key = self._keys.get(name)
            cached = _DRIVER_VIEWS.get(f"{name}:{key.id}") if key is not None else None
            if cached is None:
                rows = frame.limit(DRIVER_PAIRS + 1).collect()
                view = None
                if len(rows) <= DRIVER_PAIRS:
                    view = defaultdict(set)
                    for row in rows:
                        view[tuple(row["b"])].add(tuple(row["a"]))
                    view = dict(view)
                cached = (view,)
                if key is not None:
                    with _DRIVER_VIEWS_LOCK:
                        _DRIVER_VIEWS[f"{name}:{key.id}"] = cached
                        while len(_DRIVER_VIEWS) > DRIVER_VIEWS_KEPT:
                            _DRIVER_VIEWS.pop(next(iter(_DRIVER_VIEWS)))
            self._views[name] = cached[0]
        return self._views[name]

    def super_properties(self) -> dict[URIRef, set[URIRef]]:
        """SP on the driver: each property's strict super-properties (property hierarchies are small)."""
        if self._supers is None:
            supers: dict[URIRef, set[URIRef]] = defaultdict(set)
            if self.rdfs:
                view = self._on_driver("SP")
                pairs = (
                    ((a, b) for b, below in view.items() for a in below) if view is not None
                    else ((tuple(row["a"]), tuple(row["b"])) for row in self._closure("SP").collect())
                )
                for a, b in pairs:
                    supers[from_row(*a)].add(from_row(*b))
            self._supers = dict(supers)
        return self._supers

    def sub_properties(self) -> dict[URIRef, frozenset[URIRef]]:
        """Each property's strict sub-properties (the inverse of ``super_properties``)."""
        subs: dict[URIRef, set[URIRef]] = defaultdict(set)
        for sub, supers in self.super_properties().items():
            for sup in supers:
                subs[sup].add(sub)
        return {sup: frozenset(found) for sup, found in subs.items()}

    def statistics(self, statistics: SourceStatistics) -> SourceStatistics:
        """The optimizer's statistics with every property also counting the triples of its sub-properties, so
        that the D-Graph split keeps each source that can hold an entailed triple of a pattern."""
        if not self.rdfs:
            return statistics
        return entailed_statistics(statistics, self.sub_properties())

    def _properties_below(self, predicate: URIRef) -> list[URIRef]:
        """The stored predicates whose triples entail triples with ``predicate``: it and its sub-properties."""
        if not self.rdfs:
            return [predicate]
        return [predicate] + sorted(self.sub_properties().get(predicate, ()))

    def _terms_below(self, hierarchy: str, terms: list[tuple]) -> list[tuple]:
        """The terms at or below any of ``terms`` (term rows) by SC or SP."""
        key = (hierarchy, tuple(terms))
        if key not in self._below:
            view = self._on_driver(hierarchy)
            if view is not None:
                found = sorted({a for term in terms for a in view.get(term, ())})
            else:
                pairs = _restrict(self.spark, self._closure(hierarchy), "b", terms)
                found = [tuple(row["a"]) for row in pairs.select("a").distinct().collect()]
            self._below[key] = list(dict.fromkeys(terms + found))
        return self._below[key]

    def _equals(self, term: tuple) -> list[tuple]:
        """The equality class of a term (term rows; the term alone when it takes part in no owl:sameAs)."""
        if term not in self._classes:
            view = self._on_driver("EQ")  # symmetric: b's class is every a paired with it
            if view is not None:
                found = sorted(view.get(term, ()))
            else:
                pairs = self._closure("EQ").where(F.col("a") == term_literal(term))
                found = [tuple(row["b"]) for row in pairs.select("b").distinct().collect()]
            self._classes[term] = list(dict.fromkeys([term] + found))
        return self._classes[term]

    # matching

    def triples(self, frame: DataFrame, subject=None, predicate=None, object=None) -> DataFrame:
        """The triples of the entailed graph of ``frame`` (columns s, p, o, ts, arrival, src, as a source reader
        gives them) that can match the given constants (None: any term). Not distinct: two stored triples may
        entail the same one."""
        subject = None if isinstance(subject, Variable) else subject
        predicate = None if isinstance(predicate, Variable) else predicate
        object = None if isinstance(object, Variable) else object
        subjects = self._equals(term_row(subject)) if self.same_as and subject is not None else None
        objects = self._equals(term_row(object)) if self.same_as and object is not None else None
        if subject is not None and subjects is None:
            subjects = [term_row(subject)]
        if object is not None and objects is None:
            objects = [term_row(object)]
        rows = frame.select(*COLUMNS)
        if subjects is not None:
            rows = _restrict(self.spark, rows, "s", subjects)
        rows = self._rdfs(rows, predicate, objects) if self.rdfs else self._plain(rows, predicate, objects)
        if self.same_as:
            rows = self._substitute(rows, "s", subject)
            rows = self._substitute(rows, "o", object)
        return rows

    def match(self, frame: DataFrame, triple) -> DataFrame:
        """``triples`` for the constants of a triple pattern."""
        return self.triples(frame, triple.subject, triple.predicate, triple.object)

    @staticmethod
    def _plain(rows: DataFrame, predicate, objects) -> DataFrame:
        if predicate is not None:
            rows = rows.where(F.col("p") == constant(predicate))
        return rows if objects is None else _restrict(rows.sparkSession, rows, "o", objects)

    def _rdfs(self, rows: DataFrame, predicate, objects) -> DataFrame:
        if predicate is None:
            rows = self._all_rdfs(rows)
            return rows if objects is None else _restrict(self.spark, rows, "o", objects)
        stored = self._properties_below(predicate)
        rows = _restrict(self.spark, rows, "p", [term_row(p) for p in stored])
        if len(stored) > 1:
            rows = rows.withColumn("p", constant(predicate))
        hierarchy = {RDF_TYPE: "SC", SUB_CLASS_OF: "SC", SUB_PROPERTY_OF: "SP"}.get(predicate)
        if hierarchy is None:
            return rows if objects is None else _restrict(self.spark, rows, "o", objects)
        if objects is None:
            return self._expand_objects(rows, hierarchy)
        rows = _restrict(self.spark, rows, "o", self._terms_below(hierarchy, objects))
        if len(objects) == 1:
            return rows.withColumn("o", term_literal(objects[0]))
        return _restrict(self.spark, self._expand_objects(rows, hierarchy), "o", objects)

    def _expand_objects(self, rows: DataFrame, hierarchy: str) -> DataFrame:
        """The rows, and each row again with its object replaced by every term above it in the hierarchy."""
        pairs = F.broadcast(self._closure(hierarchy).withColumnRenamed("a", "__a").withColumnRenamed("b", "__b"))
        above = rows.join(pairs, rows["o"] == pairs["__a"]).select(
            "s", "p", F.col("__b").alias("o"), "ts", "arrival", "src"
        )
        return rows.unionByName(above)

    def _all_rdfs(self, rows: DataFrame) -> DataFrame:
        """Every entailed triple (a pattern whose predicate is a variable)."""
        supers = self.super_properties()
        parts = [rows]
        if supers:
            pairs = [(term_row(sub), term_row(sup)) for sub, found in supers.items() for sup in found]
            frame = F.broadcast(self.spark.createDataFrame(pairs, "__p struct<kind:tinyint,value:string,datatype:string,language:string>, __q struct<kind:tinyint,value:string,datatype:string,language:string>"))
            parts.append(rows.join(frame, rows["p"] == frame["__p"]).select("s", F.col("__q").alias("p"), "o", "ts", "arrival", "src"))
        for entailed_predicate, hierarchy in ((RDF_TYPE, "SC"), (SUB_CLASS_OF, "SC"), (SUB_PROPERTY_OF, "SP")):
            stored = _restrict(self.spark, rows, "p", [term_row(p) for p in self._properties_below(entailed_predicate)])
            pairs = F.broadcast(self._closure(hierarchy).withColumnRenamed("a", "__a").withColumnRenamed("b", "__b"))
            parts.append(
                stored.join(pairs, stored["o"] == pairs["__a"]).select(
                    "s", constant(entailed_predicate).alias("p"), F.col("__b").alias("o"), "ts", "arrival", "src"
                )
            )
        return reduce(DataFrame.unionByName, parts)

    def _substitute(self, rows: DataFrame, column: str, given) -> DataFrame:
        """Each row with ``column`` replaced by every member of its equality class (set to the constant when
        the pattern gives one: the rows were restricted to its class already)."""
        if given is not None:
            return rows.withColumn(column, constant(given))
        pairs = F.broadcast(self._closure("EQ").withColumnRenamed("a", "__a").withColumnRenamed("b", "__b"))
        joined = rows.join(pairs, rows[column] == pairs["__a"], "left")
        return joined.withColumn(column, F.coalesce(F.col("__b"), F.col(column))).select(*COLUMNS)


def _restrict(spark, frame: DataFrame, column: str, terms: list[tuple]) -> DataFrame:
    """The rows whose ``column`` holds one of ``terms`` (term rows): a filter with literals for a few, a
    broadcast semi-join for many."""
    if len(terms) <= LITERAL_SET:
        return frame.where(F.col(column).isin([term_literal(term) for term in terms]))
    values = spark.createDataFrame(
        [(term,) for term in terms], "__v struct<kind:tinyint,value:string,datatype:string,language:string>"
    )
    return frame.join(F.broadcast(values), frame[column] == values["__v"], "left_semi")
