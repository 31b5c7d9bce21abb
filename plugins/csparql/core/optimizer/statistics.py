"""What the optimizer may know about the sources of a query: which predicates each holds, and how many triples.

The D-Graph split (the LarKC engine design, §4) needs to know which triple patterns can match stream triples and
which can match static ones; join ordering needs sizes. Both come from here. A source the statistics say nothing
about can match any pattern, so an optimizer without statistics is correct, only less sharp.

Statistics are keyed by the source's IRI (a stream IRI, a static graph IRI, or None for the default static
graph), so they do not depend on the window a query puts on a stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rdflib import URIRef, Variable

from csparql.core.algebra import operators as alg

UNKNOWN_CARDINALITY = 1_000_000


@dataclass(frozen=True)
class SourceStatistics:
    """Per source: the number of triples of each predicate it holds (absent source = unknown)."""

    predicate_counts: Mapping[URIRef | None, Mapping[URIRef, int]] = field(default_factory=dict)

    def knows(self, source: alg.Source) -> bool:
        return source.iri in self.predicate_counts and source.iri != alg.ALL_NAMED_IRI

    def can_match(self, source: alg.Source, predicate) -> bool:
        """Whether a triple pattern with this predicate can match triples of the source."""
        if isinstance(predicate, Variable) or not self.knows(source):
            return True
        return self.predicate_counts[source.iri].get(predicate, 0) > 0

    def cardinality(self, sources: tuple[alg.Source, ...] | None, predicate) -> int:
        """An estimate of how many triples of the sources match a pattern with this predicate."""
        if sources is None or not sources or any(not self.knows(s) for s in sources):
            return UNKNOWN_CARDINALITY
        total = 0
        for source in sources:
            counts = self.predicate_counts[source.iri]
            total += sum(counts.values()) if isinstance(predicate, Variable) else counts.get(predicate, 0)
        return total


NO_STATISTICS = SourceStatistics()
