"""What building the DAGs of a registry costs: the DAG factory reads each registry file once for all its DAGs,
whatever the number of queries, and Airflow's DAG processor, with the embedded stack's settings, parses again
only the DAG files a registration changed (no Airflow stack: the DAGs are built in this process, and the
processor's own queueing is called directly)."""

from __future__ import annotations

import builtins
import io
import os
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.capacity import query_text
from csparql.deploy import registry as registry_module
from csparql.deploy.settings import Settings

pytestmark = pytest.mark.airflow

REPOSITORY = Path(__file__).resolve().parents[2]

QUERIES = 18
"""Three rounds of the capacity benchmark's mix of queries (``benchmarks/capacity.py``)."""


def test_the_factory_reads_each_registry_file_once_however_many_dags_it_builds(tmp_path, monkeypatch):
    from csparql.orchestration.factory import csparql_dags

    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    settings.registry.mkdir()
    names = []
    for index in range(QUERIES):
        name, text = query_text(index, "1m")
        (settings.registry / f"{name}.rq").write_text(text, encoding="utf-8")
        names.append(name)
    for cache in ("_READ", "_FACTS", "_COMPILED"):
        monkeypatch.setattr(registry_module, cache, {}, raising=False)  # a fresh DAG processor's process
    # The files were written milliseconds ago; a file changed less than RECENT_CHANGE_NS before it was read is
    # read again at the next look (the revision DAGs take one of their own): count them as settled.
    monkeypatch.setattr(registry_module, "RECENT_CHANGE_NS", 0, raising=False)

    reads: Counter = Counter()
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).parent == settings.registry and str(file).endswith(".rq"):
            reads[Path(file).stem] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    dags = csparql_dags(settings=settings)
    monkeypatch.undo()

    assert reads == Counter({name: 1 for name in names})  # not once per DAG built
    assert {dag_id for dag_id in dags if not dag_id.startswith(("ingest_", "revise_"))} == set(names)
    assert {dag_id for dag_id in dags if dag_id.startswith("revise_")} == {f"revise_{name}" for name in names}
    assert [dag_id for dag_id in dags if dag_id.startswith("ingest_")] == ["ingest_streams_org_milantollgates_trdf_23f7017a"]


def test_airflow_s_dag_processor_with_the_stack_s_settings_parses_again_only_what_a_registration_changed(
        tmp_path, monkeypatch):
    # Airflow's own queueing (DagFileProcessorManager.prepare_file_queue) under the embedded stack's settings:
    # every DAG file parsed a moment ago; a registration changes a producer's stream
    from datetime import datetime, timezone

    from airflow.dag_processing.manager import DagFileInfo, DagFileProcessorManager, DagFileStat

    from csparql.deploy.registration import register_text
    from csparql.stack.airflow_stack import AirflowStack

    dags = tmp_path / "dags"
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(dags / "queries"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    environment = AirflowStack(home=tmp_path / "airflow", dags=dags, settings_environment={}).environment()
    for key, value in environment.items():
        if key.startswith("AIRFLOW__DAG_PROCESSOR__"):
            monkeypatch.setenv(key, value)
    dags.mkdir()
    (dags / "csparql_streams.py").write_text((REPOSITORY / "dags" / "csparql_streams.py").read_text())
    producer = "REGISTER STREAM Busy COMPUTED EVERY 5m AS\nCONSTRUCT { ?s <http://example.org/busy> true }\n" \
               "FROM STREAM <http://example.org/in> [RANGE 10m STEP 5m]\nWHERE { ?s <http://example.org/p> ?o }\n"
    consumer = "REGISTER QUERY Reader COMPUTED EVERY 15m AS\nSELECT ?s FROM STREAM <urn:csparql:stream:Busy> " \
               "[RANGE 15m STEP 15m]\nWHERE { ?s ?p ?o }\n"
    register_text(producer, settings, name="producer")
    register_text(consumer, settings, name="reader")
    register_text(producer.replace("Busy", "Other").replace("/in>", "/other>"), settings, name="other")

    files = {path.stem: DagFileInfo(rel_path=path.relative_to(dags), bundle_name="dags-folder", bundle_path=dags)
             for path in [*dags.glob("*.py"), *(dags / "queries").glob("*.py")]}
    parsed_at = datetime.now(timezone.utc)
    for info in files.values():  # written before their last parse
        os.utime(info.absolute_path, (parsed_at.timestamp() - 5, parsed_at.timestamp() - 5))
    manager = DagFileProcessorManager(max_runs=1)
    manager._file_stats = {info: DagFileStat(last_finish_time=parsed_at, run_count=0) for info in files.values()}

    def queued() -> set[str]:
        manager._file_queue.clear()
        manager.prepare_file_queue(known_files={"dags-folder": set(files.values())})
        return {Path(info.rel_path).stem for info in manager._file_queue}

    assert queued() == set()  # nothing changed: nothing parsed before DAG_FILE_REPARSE_SECONDS
    register_text(producer.replace("Busy", "Renamed"), settings, name="producer", replace=True)
    assert queued() == {"producer", "reader", "csparql_streams"}  # "other" is not parsed again

    from csparql.stack.airflow_stack import DAG_FILE_REPARSE_SECONDS

    assert manager._file_process_interval == DAG_FILE_REPARSE_SECONDS
