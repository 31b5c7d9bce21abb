"""OpenLineage lineage of evaluations and ingests, reported through Airflow's OpenLineage provider.

The operators return these from ``get_openlineage_facets_on_complete``, the hook the provider calls when a
task succeeds; the provider sends them with its configured transport (``[openlineage] transport``). Datasets
are Delta tables named as OpenLineage names local files: namespace ``file``, name the table's absolute path.
Each carries the Delta version the task read or wrote (``version``, the standard dataset-version facet); a
stream read by an evaluation also carries its window (``csparqlWindow``).
"""

from __future__ import annotations

from pathlib import Path

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import DatasetFacet, dataset_version_dataset

from csparql.algebra import operators as alg
from csparql.engine.catalog import Catalog
from csparql.engine.runner import Evaluation
from csparql.storage.revisions import table_version
from csparql.storage.warehouse import Warehouse
from csparql.windows import format_instant

NAMESPACE = "file"
"""The OpenLineage namespace of csparql's tables: they are folders of the local (or mounted) file system."""

WINDOW_FACET = "csparqlWindow"


@attr.define
class StreamWindowDatasetFacet(DatasetFacet):
    """The window of a stream one evaluation read: the stream's IRI, the window as the query writes it, its
    bounds ``(windowStart, windowEnd]`` (ISO 8601; no start for a count-based window) and what was read."""

    stream: str
    window: str
    windowEnd: str  # noqa: N815 (OpenLineage facets are camelCase)
    windowStart: str | None = None  # noqa: N815
    triplesRead: int = 0  # noqa: N815
    filesRead: int = 0  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return "https://csparql.invalid/spec/facets/1-0-0/StreamWindowDatasetFacet.json"


def table_dataset(path: Path, version: int | None, kind: type = InputDataset, **facets: DatasetFacet):
    """The OpenLineage dataset of a Delta table (or a file) at ``path``, with its version when known."""
    if version is not None and version >= 0:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(version))
    return kind(namespace=NAMESPACE, name=str(Path(path).resolve()), facets=facets)


def evaluation_lineage(warehouse: Warehouse, plan: alg.QueryPlan, evaluation: Evaluation) -> OperatorLineage:
    """What one evaluation read and wrote: each stream table with the window read and the version its files
    were chosen from (the table's version at the evaluation's end when the window was combined from stored
    panes without reading the stream), each static graph with its version, and the table the results went to
    with the version of their commit."""
    inputs = []
    windows = {}
    for source in plan.dataset.streams:
        windows.setdefault(str(source.iri), []).append(str(source.window))
    for iri, bounds in evaluation.window.streams.items():
        path = warehouse.stream(str(iri))
        scan = evaluation.scans.get(iri)
        version = scan.version if scan is not None and scan.version is not None else table_version(path)
        facet = StreamWindowDatasetFacet(
            stream=str(iri), window=" ".join(f"[{w}]" for w in windows.get(str(iri), [])),
            windowEnd=format_instant(bounds.end),
            windowStart=format_instant(bounds.start) if bounds.start is not None else None,
            triplesRead=scan.rows if scan else 0, filesRead=scan.files if scan else 0)
        inputs.append(table_dataset(path, version, **{WINDOW_FACET: facet}))
    for graph in static_graphs(warehouse, plan):
        path = warehouse.static(graph)
        inputs.append(table_dataset(path, table_version(path)))
    outputs = []
    if evaluation.output_table is not None:
        outputs.append(table_dataset(evaluation.output_table, evaluation.output_version, OutputDataset))
    return OperatorLineage(inputs=inputs, outputs=outputs)


def static_graphs(warehouse: Warehouse, plan: alg.QueryPlan) -> list[str | None]:
    """The static graphs a plan reads that the warehouse holds (None: the default graph), each once; a query
    over every named graph reads each named graph of the warehouse."""
    graphs: dict[str | None, None] = {}
    for source in (*plan.dataset.default, *plan.dataset.named):
        if not isinstance(source, alg.StaticGraph):
            continue
        if source.iri == alg.ALL_NAMED_IRI:
            graphs.update(dict.fromkeys(str(iri) for iri in Catalog(warehouse).named_graphs()))
        else:
            graphs[None if source.iri is None else str(source.iri)] = None
    return [graph for graph in graphs if (warehouse.static(graph) / "_delta_log").is_dir()]


def ingest_lineage(warehouse: Warehouse, stream: str, landed: list[Path], version: int) -> OperatorLineage:
    """What one ingest read and wrote: the files it landed (where they are now, in ``done/``) and the stream
    table at the version its last commit made."""
    return OperatorLineage(
        inputs=[table_dataset(path, None) for path in landed],
        outputs=[table_dataset(warehouse.stream(stream), version, OutputDataset)] if landed else [],
    )
