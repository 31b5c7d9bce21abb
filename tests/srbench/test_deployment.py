"""The 17 SRBench queries deploy: each registers (``csparql register``'s code), has a deployment plan, and
becomes a DAG in a real DagBag, next to the ingestion DAG of the observations stream."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register
from csparql.deploy.settings import Settings
from csparql.srbench import query_files
from csparql.srbench.vocabulary import OBSERVATIONS
from csparql.storage.warehouse import Warehouse, output_stream_iri

pytestmark = pytest.mark.airflow

MINUTE = 60_000_000
HOUR = 60 * MINUTE
REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    root = tmp_path_factory.mktemp("airflow")
    settings = Settings(registry=root / "dags" / "queries", warehouse=Warehouse(root / "warehouse"), landing=root / "landing")
    paths = [register(path, settings) for path in query_files()]
    return root, settings, paths


def test_every_query_registers_under_its_register_name_with_its_schedule(registered):
    _, settings, paths = registered
    assert len(paths) == 17
    periods = {}
    for path in paths:
        deployment = deployment_of(path, settings)
        assert deployment.dag_id == deployment.plan.registration.name == path.stem
        assert [stream.iri for stream in deployment.inputs] == [str(OBSERVATIONS)]
        periods[path.stem] = deployment.schedule.period
    assert periods["SRBench_Q04_WindAtHotStations"] == 10 * MINUTE
    assert periods["SRBench_Q08_DailyTemperature"] == HOUR
    assert periods["SRBench_Q12_LargeCities"] == HOUR
    blizzard = deployment_of(settings.registry / "SRBench_Q05_Blizzard.rq", settings)
    assert blizzard.output_stream == str(output_stream_iri("SRBench_Q05_Blizzard"))


def test_the_dag_processor_builds_seventeen_query_dags_and_the_ingestion_dag(registered):
    root, settings, _ = registered
    shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", root / "dags")
    monkey = pytest.MonkeyPatch()
    monkey.setenv("CSPARQL_REGISTRY", str(settings.registry))
    monkey.setenv("CSPARQL_WAREHOUSE", str(settings.warehouse.root))
    monkey.setenv("CSPARQL_LANDING", str(settings.landing))
    try:
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(str(root / "dags"))
    finally:
        monkey.undo()
    assert not bag.import_errors, bag.import_errors
    queries = sorted(d for d in bag.dag_ids if not d.startswith(("ingest_", "revise_")))
    assert queries == sorted(path.stem for path in query_files_registered(settings))
    assert len(queries) == 17
    assert sorted(d for d in bag.dag_ids if d.startswith("revise_")) == [f"revise_{q}" for q in queries]
    ingestion = [d for d in bag.dag_ids if d.startswith("ingest_")]
    assert len(ingestion) == 1 and bag.dags[ingestion[0]].get_task("ingest_landed_files").stream == str(OBSERVATIONS)
    for dag_id in queries:
        dag = bag.dags[dag_id]
        assert [t.task_id for t in dag.topological_sort()] == ["evaluate_window"]
        assert type(dag.timetable).__name__ == "WindowTimetable"


def query_files_registered(settings: Settings):
    return sorted(settings.registry.glob("*.rq"))
