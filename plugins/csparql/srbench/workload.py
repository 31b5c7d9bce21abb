"""SRBench data as files, and as a loaded warehouse: what ``csparql srbench generate`` and benchmarks use.

``write_files(data, folder)`` writes the stream as timestamped N-Quads (``observations.nq``, the fourth term is
each triple's time) and the static graphs as N-Triples (``sensors.nt``, ``geonames.nt``, ``dbpedia.nt``) and
Turtle (``ontology.ttl``). ``generate_workload(warehouse, size, seed)`` generates data, writes the files and
lands them through the product's own ingest and load paths (``csparql ingest`` / ``csparql load-static``):
the stream into ``http://www.cwi.nl/SRBench/observations``, each graph into its named graph (replacing what it
held). ``query_files()`` are the 17 SRBench queries in C-SPARQL (``examples/srbench``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rdflib import Graph

from csparql.examples import examples_folder
from csparql.srbench.generator import DEFAULT_START, SRBenchData, Size, generate
from csparql.srbench.vocabulary import DBPEDIA_GRAPH, GEONAMES_GRAPH, OBSERVATIONS, ONTOLOGY, SENSORS
from csparql.storage.vocabulary import RDFS, XSD_DATETIME
from csparql.core.windows import from_micros

FILES = {SENSORS: "sensors.nt", GEONAMES_GRAPH: "geonames.nt", DBPEDIA_GRAPH: "dbpedia.nt", ONTOLOGY: "ontology.ttl"}
STREAM_FILE = "observations.nq"
QUERIES = examples_folder("srbench")


@dataclass
class Workload:
    """Generated SRBench data, the files it was written to, and (once loaded) the ingest reports."""

    data: SRBenchData
    folder: Path
    stream_file: Path
    graph_files: dict
    reports: list = field(default_factory=list)


def _instant(micros: int) -> str:
    return from_micros(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_files(data: SRBenchData, folder: str | os.PathLike) -> Workload:
    """Write the stream and the static graphs into ``folder`` (created if needed)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stream_file = folder / STREAM_FILE
    with stream_file.open("w", encoding="utf-8") as out:
        for s, p, o, tau in data.stream:
            out.write(f'{s.n3()} {p.n3()} {o.n3()} "{_instant(tau)}"^^<{XSD_DATETIME}> .\n')
    graph_files = {}
    for iri, name in FILES.items():
        path = folder / name
        triples = data.graphs[iri]
        if name.endswith(".ttl"):
            graph = Graph()
            graph.bind("rdfs", RDFS)
            graph.bind("weather", "http://knoesis.wright.edu/ssw/ont/weather.owl#")
            graph.bind("om-owl", "http://knoesis.wright.edu/ssw/ont/sensor-observation.owl#")
            graph.bind("gn", "http://www.geonames.org/ontology#")
            for triple in triples:
                graph.add(triple)
            graph.serialize(path, format="turtle")
        else:
            with path.open("w", encoding="utf-8") as out:
                for s, p, o in triples:
                    out.write(f"{s.n3()} {p.n3()} {o.n3()} .\n")
        graph_files[iri] = path
    return Workload(data, folder, stream_file, graph_files)


def generate_workload(
    warehouse,
    size: Size = Size(),
    seed: int = 1,
    folder: str | os.PathLike | None = None,
    spark=None,
    start: datetime = DEFAULT_START,
) -> Workload:
    """Generate SRBench data of ``size`` with ``seed``, write it to ``folder`` (default ``<warehouse>/landing/
    srbench``) and land it in ``warehouse`` (a ``Warehouse`` or a folder) through the ingest and load paths:
    the observations stream and the four static graphs (each replaced). ``spark`` defaults to a local session.
    The returned ``Workload`` holds the data (with its ``Scenario``: when the hurricane, rain and blizzard
    happen) and the ingest reports."""
    from csparql.ingest.ingest import ingest_stream, load_static
    from csparql.storage.warehouse import Warehouse

    if not isinstance(warehouse, Warehouse):
        warehouse = Warehouse(warehouse)
    if spark is None:
        from csparql.runtime.session import spark_session

        spark = spark_session()
    folder = Path(folder) if folder is not None else warehouse.root / "landing" / "srbench"
    workload = write_files(generate(size, seed, start), folder)
    for iri, path in workload.graph_files.items():
        workload.reports.append(load_static(spark, warehouse, str(iri), [path], replace=True))
    workload.reports.append(ingest_stream(spark, warehouse, str(OBSERVATIONS), [workload.stream_file]))
    return workload


def query_files() -> list[Path]:
    """The 17 SRBench queries rewritten in C-SPARQL, in order (``examples/srbench/q01-….rq`` …)."""
    return sorted(QUERIES.glob("q[0-9][0-9]-*.rq"))
