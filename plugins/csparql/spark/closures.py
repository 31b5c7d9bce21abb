"""Closures of static graphs, computed once per version of the graphs they come from and kept between windows.

The transitive closure of a property path over large static graphs (``gn:parentFeature+`` over GeoNames,
``skos:broader*`` over DBpedia's categories) and the hierarchies entailment needs (``rdfs:subClassOf+``,
``rdfs:subPropertyOf+``, the ``owl:sameAs`` classes) depend only on static graphs. Computing them again for
every window would repeat the same fixpoint every few minutes, so the compiler asks the ``SourceReader`` for a
``ClosureStore`` (``reader.closures``) and a version of each static graph (``reader.static_version``). A
``ClosureKey`` names a closure: what it is (the path, and the entailment it is evaluated under) and the exact
versions of the graphs it is computed from. A store answers a key with the stored pairs, or stores a newly
computed closure under it; a change to any of the graphs gives a new key, so a stale closure is never read.

The Delta-backed store of the engine (``csparql.engine.closures``) keeps closures in the warehouse, so they
survive the process (each Airflow run is a new one). Readers without a store (in-memory data) compute the
closure in every evaluation, as before.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame


@dataclass(frozen=True)
class ClosureKey:
    """What a closure is and exactly which data it is computed from.

    ``description`` says what is closed (a property path in S-expression form, the entailment it is read
    under, whether pairs carry their graph); ``sources`` are the static graphs it reads with their versions
    (``(label, version)``, in a fixed order). Two keys with the same description and graphs but other versions
    belong to one ``family``: a newer member replaces the older ones in a store.
    """

    description: str
    sources: tuple[tuple[str, str], ...]

    @property
    def family(self) -> str:
        """The closure regardless of versions (a short, stable, file-name-safe digest)."""
        text = self.description + "\n" + "\n".join(label for label, _ in self.sources)
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]

    @property
    def id(self) -> str:
        """This closure at these versions (a short, stable, file-name-safe digest)."""
        text = self.description + "\n" + "\n".join(f"{label}@{version}" for label, version in self.sources)
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


class ClosureStore(Protocol):
    """Where computed closures are kept. Frames have the columns ``a``, ``b`` (term structs) and ``g`` (the
    graph label, or null), one row per distinct pair."""

    def fetch(self, key: ClosureKey) -> DataFrame | None:
        """The closure stored under ``key``, or None when it was never stored."""

    def store(self, key: ClosureKey, pairs: DataFrame) -> DataFrame:
        """Store a computed closure under ``key`` (replacing the older members of its family) and return it as
        read back from the store."""
