"""The public API of the Airflow layer: the operators a user's own DAG uses with plain arguments, Spark chosen
through the Spark provider's connections, the DAG factory, the Assets of stream and result tables, and the
lineage the operators give the OpenLineage provider (read from real Delta tables after a real evaluation and
a real ingest). A real scheduler running them is in ``test_airflow_end_to_end.py``."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pendulum
import pytest

from csparql import samples
from csparql.deploy.registration import register
from csparql.deploy.registry import RegistrationError
from csparql.deploy.settings import Settings
from csparql.ingest.ingest import load_static
from csparql.storage.revisions import table_version

pytestmark = pytest.mark.airflow

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = (REPOSITORY / "examples" / "queries").resolve()  # package data; the checkout links to it
CITY = samples.STREAMS["citytollgates"]
MILAN = samples.STREAMS["milantollgates"]
CITY_ASSET = "csparql://streams/streams.org_citytollgates.trdf-88f7ba7c"
MILAN_ASSET = "csparql://streams/streams.org_milantollgates.trdf-23f7017a"
CONSUMER = """REGISTER QUERY EnteringCarsPerDistrict AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?district ?passages
FROM STREAM <urn:csparql:stream:CarsEnteringCityCenterPerDistrictStream> [RANGE 5m TUMBLING]
WHERE { ?district t:has-entering-cars ?passages . }
"""
USER_DAGS = """# An Airflow DAG file of a user: one line makes every DAG of the csparql registry.
from csparql.orchestration.factory import csparql_dags

csparql_dags({registry!r}, {warehouse!r})
"""


def settings_of(root: Path) -> Settings:
    return Settings.from_environment({"CSPARQL_REGISTRY": str(root / "registry"),
                                      "CSPARQL_WAREHOUSE": str(root / "warehouse")})


def a_dag(dag_id: str):
    from airflow.sdk import DAG

    return DAG(dag_id, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC"))


def serialized(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def uris(assets) -> list[str]:
    return [a.uri for a in assets if hasattr(a, "uri")]


# --- operators with plain arguments --------------------------------------------------------------------------


def test_the_evaluate_operator_takes_a_query_file_or_a_registered_name(tmp_path):
    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

    settings = settings_of(tmp_path)
    register(EXAMPLES / "04-cars-per-district.rq", settings, name="districts")
    with a_dag("user_dag"):
        by_file = CsparqlEvaluateWindowOperator(task_id="by_file", query=str(EXAMPLES / "02-cars-per-tollgate.rq"),
                                                name="per_tollgate", warehouse=tmp_path / "elsewhere")
        by_name = CsparqlEvaluateWindowOperator(task_id="by_name", query="districts", settings=settings)
    assert by_file.deployment.name == "per_tollgate"
    assert by_file.deployment.path == EXAMPLES / "02-cars-per-tollgate.rq"
    assert uris(by_file.outlets) == ["csparql://results/per_tollgate"]
    assert by_file.settings.warehouse.root == (tmp_path / "elsewhere").resolve()
    assert by_name.deployment.path == settings.registry / "districts.rq"
    assert uris(by_name.inlets) == [CITY_ASSET]
    assert uris(by_name.outlets) == ["csparql://results/districts"]
    assert "csparql_revisions" in [o.name for o in by_name.outlets if not hasattr(o, "uri")]


def test_a_trigger_evaluates_with_the_settings_of_the_task_that_deferred_it(tmp_path):
    import dataclasses

    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator
    from csparql.orchestration.triggers import WindowCompleteTrigger

    settings = dataclasses.replace(settings_of(tmp_path), spark="connect", aws_conn_id="lakehouse",
                                   allowed_lateness=90_000_000, revision_horizon=7_200_000_000)
    with a_dag("user_dag"):
        task = CsparqlEvaluateWindowOperator(task_id="t", query=str(EXAMPLES / "02-cars-per-tollgate.rq"),
                                             name="per_tollgate", settings=settings)
    arguments = json.loads(json.dumps(task.start_trigger_args.trigger_kwargs))  # as the database stores them
    trigger = WindowCompleteTrigger(**{**arguments, "window_instant": "2010-03-22T08:10:00Z"})
    request = trigger.request()
    assert request.settings.option_values() == settings.option_values()
    assert (Path(request.query).name, request.name, request.conn_id) == ("02-cars-per-tollgate.rq", "per_tollgate", None)
    # a trigger deferred by an earlier version carries the options an evaluation reads under their own keys
    earlier = {"query": arguments["evaluation"]["query"], "name": "per_tollgate", "conn_id": None,
               "registry": str(settings.registry), "landing": str(settings.landing), "spark": "connect",
               "spark_conn_id": None, "revision_horizon": 7_200_000_000, "api_conn_id": None}
    old = WindowCompleteTrigger(**{**arguments, "evaluation": earlier, "window_instant": "2010-03-22T08:10:00Z"})
    old_settings = old.request().settings
    assert (old_settings.registry, old_settings.spark, old_settings.revision_horizon) == (
        settings.registry, "connect", 7_200_000_000)


def test_an_unknown_query_is_one_line_naming_it(tmp_path):
    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

    settings = settings_of(tmp_path)
    with pytest.raises(RegistrationError) as unknown:
        CsparqlEvaluateWindowOperator(task_id="t", query="nowhere", settings=settings)
    assert str(unknown.value) == f"{settings.registry}: no query is registered as 'nowhere' (there is no nowhere.rq)"
    with pytest.raises(RegistrationError) as missing:
        CsparqlEvaluateWindowOperator(task_id="t", query=str(tmp_path / "absent.rq"), settings=settings)
    assert str(missing.value) == f"{tmp_path / 'absent.rq'}: no such query file"
    with pytest.raises(RegistrationError) as unnamed:
        CsparqlEvaluateWindowOperator(task_id="t", query=EXAMPLES / "02-cars-per-tollgate.rq", settings=settings)
    assert str(unnamed.value) == (f"{EXAMPLES / '02-cars-per-tollgate.rq'}: '02-cars-per-tollgate' cannot name the "
                                  "query's results: give the query a name (letters, digits and '_', starting with a "
                                  "letter or '_')")


# --- Spark through the Spark provider's connections ----------------------------------------------------------


def test_spark_is_chosen_by_the_connection_type_and_its_url_comes_from_the_provider_s_hook(monkeypatch):
    from airflow.exceptions import AirflowException

    from csparql.orchestration.connections import connect_url, settings_for_connection

    monkeypatch.setenv("AIRFLOW_CONN_MY_CONNECT", json.dumps(
        {"conn_type": "spark_connect", "host": "127.0.0.1", "port": 15812, "password": "s3cret"}))
    monkeypatch.setenv("AIRFLOW_CONN_MY_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                              "port": 7077}))
    monkeypatch.setenv("AIRFLOW_CONN_MY_HTTP", json.dumps({"conn_type": "http", "host": "example.org"}))
    settings = Settings.from_environment({})
    connect = settings_for_connection(settings, "my_connect")
    assert (connect.spark, connect.connection_id) == ("connect", "my_connect")
    assert connect_url(connect) == "sc://127.0.0.1:15812/;token=s3cret"
    cluster = settings_for_connection(settings, "my_cluster")
    assert (cluster.spark, cluster.connection_id) == ("standalone", "my_cluster")
    assert settings_for_connection(settings, None) is settings
    with pytest.raises(AirflowException) as wrong_type:
        settings_for_connection(settings, "my_http")
    assert str(wrong_type.value) == ("the Airflow connection 'my_http' is of type 'http': csparql runs Spark through "
                                     "a 'spark_connect' connection (a Spark Connect server) or a 'spark' connection "
                                     "(spark-submit)")
    with pytest.raises(AirflowException) as absent:
        settings_for_connection(settings, "nothing_here")
    assert str(absent.value).startswith("there is no Airflow connection 'nothing_here': create it with "
                                        "`airflow connections add nothing_here --conn-type spark_connect")


def test_the_api_connection_gives_the_api_server_s_url_and_says_what_is_wrong_in_one_line(monkeypatch):
    """The connection through which a run on the triggerer records an Asset event: its URL from a host that is
    a URL or from host, port and schema; a missing connection, one without host and an api-server that does not
    answer are each one line (the task's log says it, and the task finishes in a worker). Recording itself,
    against a real api-server, is in ``test_airflow_end_to_end.py``."""
    from csparql.orchestration.asset_events import AssetEventNotRecorded, AssetEventsApi
    from csparql.stack.airflow_stack import free_port

    closed = free_port()  # nothing listens there
    monkeypatch.setenv("AIRFLOW_CONN_API_URL", json.dumps(
        {"conn_type": "http", "host": f"http://127.0.0.1:{closed}/", "login": "svc", "password": "pw"}))
    monkeypatch.setenv("AIRFLOW_CONN_API_PARTS", json.dumps(
        {"conn_type": "http", "host": "airflow-apiserver", "port": 8080, "schema": "https"}))
    monkeypatch.setenv("AIRFLOW_CONN_API_NO_HOST", json.dumps({"conn_type": "http", "login": "svc"}))
    assert AssetEventsApi("api_url").url == f"http://127.0.0.1:{closed}"
    assert AssetEventsApi("api_parts").url == "https://airflow-apiserver:8080"
    with pytest.raises(AssetEventNotRecorded, match="the Airflow connection 'api_no_host' has no host: give the "
                                                    "api-server's URL"):
        AssetEventsApi("api_no_host")
    with pytest.raises(AssetEventNotRecorded) as absent:
        AssetEventsApi("nothing_here")
    assert str(absent.value).startswith("there is no Airflow connection 'nothing_here' ([csparql] api_conn_id): "
                                        "create it with `airflow connections add nothing_here --conn-type http")
    with pytest.raises(AssetEventNotRecorded, match=f"the api-server http://127.0.0.1:{closed} did not answer"):
        AssetEventsApi("api_url").record("csparql://streams/anything", {})


# --- the DAG factory and the Asset graph ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def factory_bag(tmp_path_factory):
    """A user's dags folder holding only the factory's one line, over a registry (outside it) with a REGISTER
    STREAM query, its consumer, a query over an ingested stream and a broken query."""
    from airflow.dag_processing.dagbag import DagBag

    root = tmp_path_factory.mktemp("factory")
    settings = settings_of(root)
    register(EXAMPLES / "07-register-stream-construct.rq", settings, name="districts")
    (root / "consumer.rq").write_text(CONSUMER, encoding="utf-8")
    register(root / "consumer.rq", settings, name="consumer")
    register(EXAMPLES / "04-cars-per-district.rq", settings, name="per_district")
    (settings.registry / "broken.rq").write_text("REGISTER QUERY Broken AS SELECT ?x WHERE {", encoding="utf-8")
    dags = root / "dags"
    dags.mkdir()
    (dags / "everything.py").write_text(USER_DAGS.format(registry=str(settings.registry),
                                                         warehouse=str(settings.warehouse.root)), encoding="utf-8")
    bag = DagBag(str(dags))
    return bag, settings


def test_one_line_creates_every_query_dag_its_ingestion_and_revision_dags(factory_bag, caplog):
    bag, settings = factory_bag
    from csparql.deploy.plan import ingest_dag_id

    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"districts", "consumer", "per_district", ingest_dag_id(CITY), ingest_dag_id(MILAN),
                                "revise_districts", "revise_consumer", "revise_per_district"}
    assert {Path(bag.dags[d].fileloc).name for d in bag.dag_ids} == {"everything.py"}


def test_a_broken_registry_file_is_left_out_with_one_line_and_the_others_are_built(tmp_path, caplog):
    from csparql.orchestration.factory import csparql_dags

    settings = settings_of(tmp_path)
    register(EXAMPLES / "04-cars-per-district.rq", settings, name="per_district")
    (settings.registry / "broken.rq").write_text("REGISTER QUERY Broken AS SELECT ?x WHERE {", encoding="utf-8")
    with caplog.at_level(logging.ERROR, logger="csparql.orchestration.factory"):
        dags = csparql_dags(settings=settings)
    assert "per_district" in dags and "broken" not in dags
    [message] = [r.getMessage() for r in caplog.records]
    assert message.startswith("no DAG for broken.rq: broken.rq:1:") and "\n" not in message


def test_the_asset_graph_links_a_register_stream_query_to_its_consumers_through_its_output_stream(factory_bag):
    from csparql.deploy.plan import ingest_dag_id

    bag, _ = factory_bag
    producer = serialized(bag.dags["districts"]).get_task("evaluate_window")
    consumer = serialized(bag.dags["consumer"]).get_task("evaluate_window")
    ingest = serialized(bag.dags[ingest_dag_id(MILAN)]).get_task("ingest_landed_files")
    milan = MILAN_ASSET
    output = "csparql://streams/CarsEnteringCityCenterPerDistrictStream"
    assert uris(ingest.outlets) == [milan]  # ingest → stream table
    assert uris(producer.inlets) == [milan] and uris(producer.outlets) == [output]  # stream → query → its stream
    assert uris(consumer.inlets) == [output]  # … → the consumer
    assert uris(consumer.outlets) == ["csparql://results/consumer"]  # → its result table
    # what Airflow's dependency graph is drawn from: the producer DAG's dependencies name the stream's Asset
    from airflow.serialization.serialized_objects import DagSerialization

    dependencies = DagSerialization.to_dict(bag.dags["districts"])["dag"]["dag_dependencies"]
    assert {d["dependency_id"] for d in dependencies if d["dependency_type"] == "asset"} >= {
        json.dumps({"name": "csparql_stream_CarsEnteringCityCenterPerDistrictStream", "uri": output})}


# --- lineage from real evaluations and ingests ---------------------------------------------------------------


@pytest.fixture(scope="module")
def landed(tmp_path_factory, spark):
    """A warehouse with the city graph loaded, and the city tollgates stream waiting in its landing folder."""
    root = tmp_path_factory.mktemp("lineage")
    files = samples.write_samples(root / "samples", hours=1)
    settings = settings_of(root)
    load_static(spark, settings.warehouse, None, [files.graphs[None]], replace=True)
    landing = settings.landing_folder(CITY)
    landing.mkdir(parents=True)
    shutil.copy(files.streams[CITY], landing / "city.nq")
    return {"root": root, "files": files, "settings": settings, "landing": landing}


def test_an_ingest_reports_the_files_landed_and_the_stream_version_it_wrote(landed):
    from csparql.orchestration.operators import CsparqlIngestOperator

    settings, landing = landed["settings"], landed["landing"]
    with a_dag("user_ingest"):
        ingest = CsparqlIngestOperator(task_id="ingest", stream=CITY, warehouse=settings.warehouse.root)
    assert ingest.landing == landing and uris(ingest.outlets) == [CITY_ASSET]
    outcome = ingest.execute(context={})
    assert outcome["landed_files"] == ["city.nq"]
    lineage = ingest.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name, d.facets) for d in lineage.inputs] == [("file", str(landing / "done" / "city.nq"), {})]
    [output] = lineage.outputs
    table = settings.warehouse.stream(CITY)
    assert (output.namespace, output.name) == ("file", str(table))
    assert output.facets["version"].datasetVersion == str(table_version(table))


def test_an_evaluation_reports_its_windows_static_graphs_and_result_table_with_their_versions(landed):
    from csparql.engine.runner import Engine
    from csparql.orchestration.lineage import evaluation_lineage
    from csparql.deploy.plan import deployment_of_query
    from csparql.runtime.session import spark_session

    settings, files = landed["settings"], landed["files"]
    if not (settings.warehouse.stream(CITY) / "_delta_log").is_dir():
        test_an_ingest_reports_the_files_landed_and_the_stream_version_it_wrote(landed)
    deployment = deployment_of_query(EXAMPLES / "04-cars-per-district.rq", settings, name="per_district")
    at = files.start + 30 * 60_000_000
    evaluation = Engine(settings.warehouse, spark_session()).evaluate(deployment.plan, at, "per_district")
    lineage = evaluation_lineage(settings.warehouse, deployment.plan, evaluation)
    stream, graph = lineage.inputs
    assert (stream.namespace, stream.name) == ("file", str(settings.warehouse.stream(CITY)))
    assert stream.facets["version"].datasetVersion == str(table_version(settings.warehouse.stream(CITY)))
    window = stream.facets["csparqlWindow"]
    assert (window.stream, window.window, window.windowStart, window.windowEnd) == (
        CITY, "[RANGE 30m STEP 5m]", "2010-03-22T08:00:00Z", "2010-03-22T08:30:00Z")
    assert window.triplesRead == evaluation.scans[next(iter(evaluation.scans))].rows > 0
    assert (graph.name, graph.facets["version"].datasetVersion) == (
        str(settings.warehouse.static(None)), str(table_version(settings.warehouse.static(None))))
    [output] = lineage.outputs
    results = settings.warehouse.results("per_district", "bindings")
    assert (output.name, output.facets["version"].datasetVersion) == (str(results), str(table_version(results)))
    assert "csparqlWindow" not in output.facets
