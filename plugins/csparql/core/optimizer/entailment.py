"""What the optimizer must know of entailment: a property also holds the triples of its sub-properties.

Under ``ENTAILMENT RDFS`` a pattern ``?s q ?o`` matches the stored triples of every sub-property of q (rdfs7),
so a source that holds only a sub-property of q can still match it. ``entailed_statistics`` gives statistics in
which every property counts the triples of its sub-properties too; with them, the D-Graph split and join
ordering stay exact under entailment. Substitution by ``owl:sameAs`` never changes a predicate.
"""

from __future__ import annotations

from collections.abc import Mapping

from rdflib import URIRef

from csparql.core.optimizer.statistics import SourceStatistics


def entailed_statistics(statistics: SourceStatistics, sub_properties: Mapping[URIRef, frozenset[URIRef]]) -> SourceStatistics:
    """``statistics`` where each property's count per source adds the counts of its (strict) sub-properties."""
    if not sub_properties:
        return statistics
    adjusted = {}
    for source, counts in statistics.predicate_counts.items():
        entailed = dict(counts)
        for prop, subs in sub_properties.items():
            extra = sum(counts.get(sub, 0) for sub in subs)
            if extra:
                entailed[prop] = entailed.get(prop, 0) + extra
        adjusted[source] = entailed
    return SourceStatistics(adjusted)
