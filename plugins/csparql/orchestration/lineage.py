"""OpenLineage lineage of evaluations and ingests, reported through Airflow's OpenLineage provider.

The operators return these from ``get_openlineage_facets_on_complete``, the hook the provider calls when a
task succeeds; the provider sends them with its configured transport (``[openlineage] transport``). Datasets
are Delta tables named as OpenLineage names files: on local disk namespace ``file``, name the table's absolute
path; in S3 namespace ``s3://bucket``, name the table's key.
Each carries the Delta version the task read or wrote (``version``, the standard dataset-version facet); a
stream read by an evaluation also carries its window (``csparqlWindow``). A message-bus source is named as
OpenLineage names a Kafka topic: namespace ``kafka://bootstrap-server`` (``redis://host:port`` for a Redis
stream), name the topic (the stream's key).

A window evaluated on the triggerer (Spark Connect) and ended there has no task process, so the provider's
listener sends nothing for it: the trigger sends its events itself, through the provider's client
(``report_run_ended_on_triggerer``), named as the listener names a task's events.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import DatasetFacet, dataset_version_dataset

from csparql.core.algebra import operators as alg
from csparql.engine.catalog import Catalog
from csparql.engine.runner import Evaluation
from csparql.storage.location import ObjectPath
from csparql.storage.revisions import table_version
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant

NAMESPACE = "file"
"""The OpenLineage namespace of csparql's tables on a local (or mounted) file system."""

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


def table_dataset(path: Path | ObjectPath, version: int | None, kind: type = InputDataset,
                  **facets: DatasetFacet):
    """The OpenLineage dataset of a Delta table (or a file) at ``path``, local or in S3, with its version when
    known."""
    if version is not None and version >= 0:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(version))
    if isinstance(path, ObjectPath):
        return kind(namespace=f"s3://{path.bucket}", name=path.key, facets=facets)
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


_ADAPTER = None


def _openlineage_adapter():
    """The process's ``OpenLineageAdapter`` (one OpenLineage client, one transport, for every event)."""
    global _ADAPTER
    if _ADAPTER is None:
        from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

        _ADAPTER = OpenLineageAdapter()
    return _ADAPTER


def report_run_ended_on_triggerer(task_instance, started: datetime, lineage: OperatorLineage | None,
                                  error: str | None = None, log: logging.Logger | None = None) -> bool:
    """Send the OpenLineage START and COMPLETE events (FAIL with ``error``) of a task that the triggerer
    evaluated and ended, where no task process runs and so the OpenLineage provider's listener sends none:
    through the provider's own client and configuration (``[openlineage]``: disabled, transport, namespace,
    emission policy), with the job name (``dag_id.task_id``), run id and parent run a task process's run of the
    same try would have, and ``lineage`` (``evaluation_lineage``) as its datasets. ``task_instance`` is the
    trigger's (a ``RuntimeTaskInstance`` when the task started on the triggerer). Whether events were sent;
    a failure to send is logged, never raised."""
    from airflow.providers.openlineage import conf as openlineage_conf

    log = log or logging.getLogger(__name__)
    try:
        if openlineage_conf.is_disabled():
            return False
        run = _dag_run_of(task_instance)
        if run is None:
            log.info("no OpenLineage events for this run: the triggerer gave no DAG run with its task instance")
            return False
        return _emit_task_events(task_instance, run, started, lineage or OperatorLineage(), error, log)
    except Exception as failure:  # noqa: BLE001 - lineage must never change how the task ends
        log.warning("the OpenLineage events of this run were not sent: %s: %s", type(failure).__name__, failure)
        return False


def _dag_run_of(task_instance):
    """The DAG run of the trigger's task instance (``dag_run`` of its template context), else None."""
    if task_instance is None or not hasattr(task_instance, "get_template_context"):
        return None
    return task_instance.get_template_context().get("dag_run")


def _emit_task_events(ti, run, started: datetime, lineage: OperatorLineage, error: str | None,
                      log: logging.Logger) -> bool:
    from airflow.providers.openlineage.utils.emission_policy import resolve_task_emission_policy
    from airflow.providers.openlineage.utils.utils import get_job_name, get_task_parent_run_facet

    task = getattr(ti, "task", None)
    if task is not None and not resolve_task_emission_policy(operator=task, dag_id=ti.dag_id,
                                                             task_id=ti.task_id).emit:
        return False
    adapter = _openlineage_adapter()
    date = run.logical_date or run.run_after
    run_id = adapter.build_task_instance_run_id(dag_id=ti.dag_id, task_id=ti.task_id, try_number=ti.try_number,
                                               logical_date=date, map_index=ti.map_index)
    parent = adapter.build_dag_run_id(dag_id=ti.dag_id, logical_date=date, clear_number=run.clear_number or 0)
    dag = getattr(task, "dag", None)
    owner = getattr(task, "owner", None)
    if owner in (None, "airflow") and dag is not None:
        owner = getattr(dag, "owner", owner)
    common = {
        "run_id": run_id, "job_name": get_job_name(ti), "job_description": None,
        "nominal_start_time": _iso(run.data_interval_start), "nominal_end_time": _iso(run.data_interval_end),
        "owners": [name.strip() for name in owner.split(",")] if owner else None,
        "tags": sorted(getattr(dag, "tags", None) or []) or None,
        "run_facets": get_task_parent_run_facet(parent_run_id=parent, parent_job_name=ti.dag_id,
                                                dr_conf=run.conf or {}),
    }
    adapter.start_task(event_time=started.isoformat(), task=OperatorLineage(), **common)
    ended = datetime.now(timezone.utc).isoformat()
    if error is None:
        adapter.complete_task(end_time=ended, task=lineage, **common)
    else:
        adapter.fail_task(end_time=ended, task=lineage, error=error, **common)
    log.info("sent the OpenLineage events of %s (run %s)", common["job_name"], run_id)
    return True


def _iso(instant) -> str | None:
    return instant.isoformat() if isinstance(instant, datetime) else instant


def ingest_lineage(warehouse: Warehouse, stream: str, landed: list[Path], version: int) -> OperatorLineage:
    """What one ingest read and wrote: the files it landed (where they are now, in ``done/``) and the stream
    table at the version its last commit made."""
    return OperatorLineage(
        inputs=[table_dataset(path, None) for path in landed],
        outputs=[table_dataset(warehouse.stream(stream), version, OutputDataset)] if landed else [],
    )


def consume_lineage(warehouse: Warehouse, stream: str, namespace: str, name: str, version: int | None
                    ) -> OperatorLineage:
    """What one consume of a message-bus source read and wrote: the Redis stream or Kafka topic, as OpenLineage
    names them (namespace ``redis://host:port`` or ``kafka://bootstrap-server``, name the stream's key or the
    topic), and the stream table at the version its last batch made (no output when no batch was committed)."""
    output = [table_dataset(warehouse.stream(stream), version, OutputDataset)] if version is not None else []
    return OperatorLineage(inputs=[InputDataset(namespace=namespace, name=name, facets={})], outputs=output)
