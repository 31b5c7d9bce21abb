"""Entailment made explicit for the independent evaluator: a small forward-chaining closure, written from the
rules' definitions and nothing else (it shares no code with ``csparql.spark.entailment``).

``close(triples, regimes)`` applies the rules to a set of triples until nothing new follows:

- RDFS: rdfs5 (p ⊑ q, q ⊑ r ⟹ p ⊑ r for rdfs:subPropertyOf), rdfs7 (s p o, p ⊑ q ⟹ s q o), rdfs9
  (s a c, c ⊑ d ⟹ s a d), rdfs11 (c ⊑ d, d ⊑ e ⟹ c ⊑ e for rdfs:subClassOf);
- SAMEAS: eq-sym (x = y ⟹ y = x), eq-trans (x = y, y = z ⟹ x = z), eq-rep-s (s p o, s = t ⟹ t p o), eq-rep-o
  (s p o, o = t ⟹ s p t), where = is owl:sameAs.

Terms are whatever hashable values the caller uses (pyoxigraph terms for the reference evaluator); the
vocabulary IRIs are compared by their string value.
"""

from __future__ import annotations

from collections import defaultdict

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
SUB_CLASS_OF = "http://www.w3.org/2000/01/rdf-schema#subClassOf"
SUB_PROPERTY_OF = "http://www.w3.org/2000/01/rdf-schema#subPropertyOf"
SAME_AS = "http://www.w3.org/2002/07/owl#sameAs"


def _is(term, iri: str) -> bool:
    return getattr(term, "value", None) == iri and type(term).__name__ == "NamedNode"


def _round(triples: set, regimes: tuple[str, ...]) -> set:
    """Everything one application of every rule gives."""
    new = set()
    by_predicate = defaultdict(list)
    for s, p, o in triples:
        by_predicate[p].append((s, o))
    sub_property = [(s, o) for p, pairs in by_predicate.items() if _is(p, SUB_PROPERTY_OF) for s, o in pairs]
    sub_class = [(s, o) for p, pairs in by_predicate.items() if _is(p, SUB_CLASS_OF) for s, o in pairs]
    same = [(s, o) for p, pairs in by_predicate.items() if _is(p, SAME_AS) for s, o in pairs]
    if "RDFS" in regimes:
        supers = defaultdict(set)
        for p, q in sub_property:
            supers[p].add(q)
        classes = defaultdict(set)
        for c, d in sub_class:
            classes[c].add(d)
        predicate_of = {p for p in by_predicate}
        sub_property_term = next((p for p in predicate_of if _is(p, SUB_PROPERTY_OF)), None)
        sub_class_term = next((p for p in predicate_of if _is(p, SUB_CLASS_OF)), None)
        for p, q in sub_property:  # rdfs5
            for r in supers.get(q, ()):
                new.add((p, sub_property_term, r))
        for c, d in sub_class:  # rdfs11
            for e in classes.get(d, ()):
                new.add((c, sub_class_term, e))
        for s, p, o in triples:
            for q in supers.get(p, ()):  # rdfs7
                new.add((s, q, o))
            if _is(p, RDF_TYPE):  # rdfs9
                for d in classes.get(o, ()):
                    new.add((s, p, d))
    if "SAMEAS" in regimes:
        equal = defaultdict(set)
        same_term = next((p for p in by_predicate if _is(p, SAME_AS)), None)
        for x, y in same:
            equal[x].add(y)
            new.add((y, same_term, x))  # eq-sym
        for x, y in same:  # eq-trans
            for z in equal.get(y, ()):
                new.add((x, same_term, z))
        for s, p, o in triples:
            for t in equal.get(s, ()):  # eq-rep-s
                new.add((t, p, o))
            for t in equal.get(o, ()):  # eq-rep-o
                new.add((s, p, t))
    return new - triples


def close(triples, regimes: tuple[str, ...]) -> set:
    """The closure of ``triples`` under the rules of ``regimes`` ("RDFS", "SAMEAS")."""
    closed = set(triples)
    while True:
        new = _round(closed, regimes)
        if not new:
            return closed
        closed |= new
