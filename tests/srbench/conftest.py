"""The generated SRBench workload the query tests share: generated and landed once per test session, since
both the C-SPARQL queries (``test_queries``) and their RSP-QL forms (``test_rspql_queries``) are evaluated over
it."""

from __future__ import annotations

import pytest
from rdflib import Graph

from csparql.engine.runner import Engine
from csparql.srbench import Size, generate_workload
from csparql.storage.warehouse import Warehouse

SIZE = Size(stations=12, hours=30, rate=1, towns_per_county=2)
SEED = 7


@pytest.fixture(scope="session")
def workload(spark, tmp_path_factory):
    """(the loaded workload, its warehouse, each static graph's triples as rdflib parsed them)."""
    root = tmp_path_factory.mktemp("srbench")
    warehouse = Warehouse(root / "warehouse")
    loaded = generate_workload(warehouse, SIZE, SEED, folder=root / "files", spark=spark)
    assert all(report.rejected == 0 for report in loaded.reports)
    graphs = {}
    for iri, path in loaded.graph_files.items():
        graphs[iri] = list(Graph().parse(path, format="turtle" if path.suffix == ".ttl" else "nt"))
    return loaded, warehouse, graphs


@pytest.fixture(scope="session")
def engine(workload, spark):
    return Engine(workload[1], spark)
