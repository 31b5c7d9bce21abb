"""The registry as Airflow's DAG processor sees it: every example query registered, parsed by a real DagBag."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from csparql.deploy.history import versions
from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register
from csparql.core import frontend as frontend_module
from csparql.deploy import registry as registry_module
from csparql.deploy.registry import RegistrationError, sync_loaders, write_loader
from csparql.deploy.settings import Settings
from csparql.core.frontend import compile_query
from csparql.core.schedule import evaluation_period
from csparql.core.language.errors import QueryError
from csparql.orchestration.dags import INGEST_PRIORITY, registered_query_dag
from csparql.core.windows import to_micros

pytestmark = pytest.mark.airflow

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = sorted([*(REPOSITORY / "examples" / "queries").glob("*.rq"),
                   *(REPOSITORY / "examples" / "queries" / "refused").glob("*.rq")], key=lambda path: path.name)
CITY_TOLLGATES = "http://streams.org/citytollgates.trdf"  # the stream of 04-cars-per-district
CONSUMER = """REGISTER QUERY EnteringCarsPerDistrict AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?district ?passages
FROM STREAM <urn:csparql:stream:CarsEnteringCityCenterPerDistrictStream> [RANGE 5m TUMBLING]
WHERE { ?district t:has-entering-cars ?passages . }
"""


def registry_stem(example: Path) -> str:
    return "q" + re.sub(r"[^A-Za-z0-9_]", "_", example.stem)


def is_valid(example: Path) -> bool:
    try:
        compile_query(example.read_text(encoding="utf-8"), example.name)
    except QueryError:
        return False
    return True


SCHEDULED = {registry_stem(e) for e in EXAMPLES if is_valid(e)
             and evaluation_period(compile_query(e.read_text(encoding="utf-8"), e.name)) is not None}
"""The valid examples that run on a schedule: each has a revision DAG (in the ingestion DAGs' file)."""


COMPILES: Counter = Counter()
"""The queries the deployment layer compiled while the module's DagBag was parsed, per registry file."""


def counting_compile_query(text: str, source_name: str = "<query>"):
    COMPILES[source_name] += 1
    return compile_query(text, source_name)


@pytest.fixture(scope="module")
def dags_folder(tmp_path_factory):
    """An Airflow DAG folder with every example query registered, and the ingestion DAGs' file."""
    root = tmp_path_factory.mktemp("airflow")
    dags = root / "dags"
    registry = dags / "queries"
    registry.mkdir(parents=True)
    shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", dags)
    for example in EXAMPLES:
        write_loader(Path(shutil.copy(example, registry / f"{registry_stem(example)}.rq")))
    monkey = pytest.MonkeyPatch()
    monkey.setenv("CSPARQL_REGISTRY", str(registry))
    monkey.setenv("CSPARQL_WAREHOUSE", str(root / "warehouse"))
    yield dags
    monkey.undo()


@pytest.fixture(scope="module")
def bag(dags_folder):
    from airflow.dag_processing.dagbag import DagBag

    monkey = pytest.MonkeyPatch()
    monkey.setattr(frontend_module, "compile_query", counting_compile_query)
    COMPILES.clear()
    yield DagBag(str(dags_folder))
    monkey.undo()


def test_one_dag_per_valid_example_and_one_import_error_for_the_invalid_one(bag):
    valid = {registry_stem(e) for e in EXAMPLES if is_valid(e)}
    invalid = [e for e in EXAMPLES if not is_valid(e)]
    assert len(valid) == 16 and len(invalid) == 1
    assert {d for d in bag.dag_ids if not d.startswith(("ingest_", "revise_"))} == valid
    assert {d for d in bag.dag_ids if d.startswith("revise_")} == {f"revise_{q}" for q in valid if q in SCHEDULED}
    assert len(bag.import_errors) == 1
    (loader, message), = bag.import_errors.items()
    assert loader.endswith(f"{registry_stem(invalid[0])}.py")
    assert f"{registry_stem(invalid[0])}.rq:7:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in message
    assert "^^^^^^" in message  # the caret under SELECT


def test_parsing_the_whole_registry_compiles_each_query_once(bag):
    assert COMPILES == Counter({f"{registry_stem(e)}.rq": 1 for e in EXAMPLES})  # not once per DAG file


def test_a_dag_processor_process_per_file_compiles_no_valid_query_once_the_facts_are_kept(dags_folder, tmp_path):
    # Airflow 3's DAG processor parses each DAG file in a process it forks for that file: nothing compiled in
    # one survives to the next but the warehouse's compile cache. Two parsing loops, each file in a fresh state.
    from airflow.dag_processing.dagbag import DagBag

    files = [dags_folder / "csparql_streams.py", *sorted((dags_folder / "queries").glob("*.py"))]
    monkey = pytest.MonkeyPatch()
    monkey.setattr(frontend_module, "compile_query", counting_compile_query)
    monkey.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "warehouse"))  # a cold compile cache
    try:
        loops = []
        for _ in range(2):
            per_file = {}
            for file in files:
                monkey.setattr(registry_module, "_COMPILED", {})
                monkey.setattr(registry_module, "_FACTS", {})
                monkey.setattr(registry_module, "_READ", {})
                COMPILES.clear()
                parsed = DagBag(str(file))
                per_file[file.stem] = (dict(COMPILES), len(parsed.dags), list(parsed.import_errors.values()))
            loops.append(per_file)
    finally:
        monkey.undo()
    queries = [file.stem for file in files[1:]]
    invalid = next(registry_stem(e) for e in EXAMPLES if not is_valid(e))
    first, second = loops
    streams_file_dags = 6 + len(SCHEDULED)  # the ingestion DAGs and the revision DAGs
    assert first["csparql_streams"][:2] == ({f"{q}.rq": 1 for q in queries}, streams_file_dags)  # the first compiles them all
    for loop in loops:
        for query in queries:  # then a query's DAG is built from its facts; only the invalid one compiles (its error)
            compiled, dags, errors = loop[query]
            assert compiled == ({f"{query}.rq": 1} if query == invalid else {})
            assert dags == (0 if query == invalid else 1)
        (error,) = loop[invalid][2]  # the invalid query's import error, as when it was compiled by others
        assert f"{invalid}.rq:7:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in error
    assert second["csparql_streams"] == ({}, streams_file_dags, [])


def test_a_dag_from_the_kept_facts_loads_neither_parser_nor_algebra_and_is_the_compiled_dag(dags_folder, bag):
    # Airflow's DAG processor forks a process per DAG file parse and per task callback (every run that ends on
    # the triggerer sends one): such a process builds the query's DAG from the facts the module's DagBag kept,
    # without loading the parser or the query algebra (most of what such a process imported of csparql),
    # and serializes the same DAG as this process, which compiled the query.
    import json
    import subprocess
    import sys

    from airflow.serialization.serialized_objects import DagSerialization

    loader = dags_folder / "queries" / "q07_register_stream_construct.py"
    script = ("import json, sys\n"
              "from airflow.serialization.serialized_objects import DagSerialization\n"
              "from airflow.dag_processing.dagbag import DagBag\n"
              f"(dag,) = DagBag({str(loader)!r}).dags.values()\n"
              "print(json.dumps({'parser': 'lark' in sys.modules, 'compiled': 'csparql.core.frontend' in sys.modules,"
              " 'algebra': sorted(m for m in sys.modules if m.startswith(('csparql.core.algebra', 'csparql.core.panes.'))),"
              " 'dag': DagSerialization.to_dict(dag)}, sort_keys=True, default=str))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    fresh = json.loads(done.stdout.strip().splitlines()[-1])
    assert fresh["parser"] is False and fresh["compiled"] is False
    assert fresh["algebra"] == ["csparql.core.panes.modes"]
    here = json.loads(json.dumps(DagSerialization.to_dict(bag.dags["q07_register_stream_construct"]), sort_keys=True,
                                 default=str))
    assert fresh["dag"] == here


def test_each_query_dag_is_one_task_that_starts_waiting_on_the_triggerer_then_evaluates(bag):
    dag = bag.dags["q04_cars_per_district"]
    assert [t.task_id for t in dag.topological_sort()] == ["evaluate_window"]
    assert type(dag.timetable).__name__ == "WindowTimetable"
    assert dag.timetable.schedule.period == 5 * 60 * 1_000_000
    assert bag.dags["q01_sensors_per_street"].timetable.can_be_scheduled is False  # one-shot: on demand
    # what the scheduler and the triggerer read: the serialized DAG
    task = serialized(dag).get_task("evaluate_window")
    assert task.pool == "csparql_spark"
    assert task.start_from_trigger is True  # the scheduler defers it on the triggerer: no task process to wait
    start = task.start_trigger_args
    assert (start.trigger_cls, start.next_method, start.timeout) == (
        "csparql.orchestration.triggers.WindowCompleteTrigger", "evaluate", timedelta(minutes=10))  # the wait timeout
    assert "window_instant" in task.template_fields  # the triggerer renders the run's instant into the trigger


def serialized(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


def trigger_of(task, run_after: datetime, data_interval_end: datetime | None):
    """The trigger the triggerer runs for a run of ``task`` (a serialized task): built from the trigger's
    arguments as the metadata database stores them, its instant rendered from the run as the triggerer does."""
    from airflow.models.trigger import Trigger
    from airflow.serialization.decoders import smart_decode_trigger_kwargs

    from csparql.orchestration.triggers import WindowCompleteTrigger

    start = task.start_trigger_args
    stored = Trigger(classpath=start.trigger_cls, kwargs=start.trigger_kwargs)
    arguments = {k: smart_decode_trigger_kwargs(v) for k, v in Trigger._decrypt_kwargs(stored.encrypted_kwargs).items()}
    trigger = WindowCompleteTrigger(**arguments)
    trigger.task_instance = SimpleNamespace(task=task, task_id=task.task_id)  # picks the fields to render
    trigger.render_template_fields({"dag_run": SimpleNamespace(run_after=run_after,
                                                               data_interval_end=data_interval_end)})
    return trigger


def test_the_trigger_waits_for_what_the_run_s_window_needs(bag):
    dag = bag.dags["q04_cars_per_district"]
    task = serialized(dag).get_task("evaluate_window")
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(Path(dag.fileloc).parent),
                                          "CSPARQL_WAREHOUSE": str(Path(dag.fileloc).parents[2] / "warehouse")})
    deployment = deployment_of(Path(dag.fileloc).with_suffix(".rq"), settings)
    window_end = datetime(2010, 3, 22, 8, 50, tzinfo=timezone.utc)
    scheduled = trigger_of(task, window_end + timedelta(seconds=5), window_end)  # a scheduled run or a backfill
    assert scheduled.requirements() == deployment.requirements(to_micros(window_end))
    manual = trigger_of(task, window_end + timedelta(minutes=2), None)  # a manual run: its window closed before
    assert manual.requirements() == deployment.requirements(to_micros(window_end + timedelta(minutes=2)))
    assert manual.requirements().window_end == to_micros(window_end)
    assert scheduled.requirements().streams == {CITY_TOLLGATES: to_micros(window_end) + 60_000_000}  # + lateness
    assert scheduled.missing() == [f"<{CITY_TOLLGATES}> until 2010-03-22T08:51:00Z (no watermark yet)"]


def test_a_query_reading_another_query_s_stream_has_its_asset_as_inlet(tmp_path):
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    register(REPOSITORY / "examples" / "queries" / "07-register-stream-construct.rq", settings, name="districts")
    (tmp_path / "consumer.rq").write_text(CONSUMER, encoding="utf-8")
    loader = register(tmp_path / "consumer.rq", settings, name="consumer").with_suffix(".py")
    task = serialized(registered_query_dag(loader, settings)).get_task("evaluate_window")
    assert [i.uri for i in task.inlets] == ["csparql://streams/CarsEnteringCityCenterPerDistrictStream"]
    assert stream_assets(task.outlets) == ["csparql://results/consumer"]  # its result table
    assert alias_names(task.outlets) == ["csparql_revisions"]  # how its commits announce stale windows
    assert task.start_trigger_args.trigger_kwargs  # the wait for the producer's windows travels with the task
    window_end = datetime(2010, 3, 22, 8, 55, tzinfo=timezone.utc)
    trigger = trigger_of(task, window_end, window_end)
    assert trigger.requirements().producer_windows == {"districts": [to_micros(window_end)]}


def test_a_register_stream_query_produces_an_asset(bag):
    evaluate = bag.dags["q07_register_stream_construct"].get_task("evaluate_window")
    assert stream_assets(evaluate.outlets) == ["csparql://streams/CarsEnteringCityCenterPerDistrictStream"]
    assert alias_names(evaluate.outlets) == ["csparql_revisions"]


def stream_assets(outlets) -> list[str]:
    """The URIs of the assets among a task's outlets (not the Asset aliases)."""
    return [o.uri for o in outlets if hasattr(o, "uri")]


def alias_names(outlets) -> list[str]:
    """The names of the Asset aliases among a task's outlets."""
    return [o.name for o in outlets if not hasattr(o, "uri")]


def test_every_stream_the_queries_read_gets_an_ingestion_dag(bag):
    ingest = sorted(d for d in bag.dag_ids if d.startswith("ingest_"))
    assert len(ingest) == 6  # milan, uc.eu, city tollgates, city cameras, market, getglue
    assert all(bag.dags[d].get_task("ingest_landed_files").stream for d in ingest)


def test_ingests_have_a_pool_of_their_own_and_go_first_so_a_backlog_of_evaluations_never_delays_fresh_data(bag):
    # Before ingests had a pool of their own, a file landed while the examples' backfills ran waited 8 minutes,
    # its ingest queued behind every backfilled evaluation in the one shared pool. What the scheduler reads is
    # the serialized DAG.
    evaluations = [serialized(bag.dags[d]).get_task(t) for d, t in (("q04_cars_per_district", "evaluate_window"),
                                                                    ("revise_q04_cars_per_district", "revise_stale_windows"))]
    ingests = [serialized(bag.dags[d]).get_task("ingest_landed_files") for d in bag.dag_ids if d.startswith("ingest_")]
    assert {t.pool for t in evaluations} == {Settings.pool}
    assert {t.pool for t in ingests} == {Settings.ingest_pool} and Settings.ingest_pool != Settings.pool
    assert {priority(t) for t in ingests} == {INGEST_PRIORITY}
    for rule in ("absolute", "downstream", "upstream"):  # whatever [core] default_task_weight_rule says
        assert INGEST_PRIORITY > max(priority(t, rule) for t in evaluations)


def priority(task, default_rule: str | None = None) -> int:
    """The priority the scheduler gives the task's instances (under another default weight rule if given, for
    a task that sets none of its own)."""
    from airflow.task.priority_strategy import validate_and_load_priority_weight_strategy

    rule = validate_and_load_priority_weight_strategy(default_rule) if default_rule else task.weight_rule
    return rule.get_weight(SimpleNamespace(task=task))


def test_every_task_is_retried_so_that_a_transient_airflow_error_does_not_fail_its_run(bag):
    # an ingest whose files landed can still fail when the api-server times out (SQLite under load); its retry
    # finds nothing waiting and succeeds
    tasks = [bag.dags[d].get_task("ingest_landed_files") for d in bag.dag_ids if d.startswith("ingest_")]
    tasks += [bag.dags["q04_cars_per_district"].get_task("evaluate_window")]
    assert {(t.retries, t.retry_delay.total_seconds()) for t in tasks} == {(Settings.retries, 30.0)}


def test_register_refuses_a_second_producer_of_the_same_stream_and_keeps_the_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("CSPARQL_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "warehouse"))
    settings = Settings.from_environment()
    construct = REPOSITORY / "examples" / "queries" / "07-register-stream-construct.rq"
    first = register(construct, settings)
    assert first.name == "CarsEnteringCityCenterPerDistrictStream.rq" and first.with_suffix(".py").exists()
    with pytest.raises(RegistrationError, match="already produced by CarsEnteringCityCenterPerDistrictStream.rq"):
        register(construct, settings, name="Copy")
    assert sorted(p.name for p in settings.registry.iterdir() if not p.name.startswith(".")) == [
        "CarsEnteringCityCenterPerDistrictStream.py", "CarsEnteringCityCenterPerDistrictStream.rq"]
    assert [v.number for v in versions("CarsEnteringCityCenterPerDistrictStream", settings)] == [1]
    assert versions("Copy", settings) == []  # a refused registration keeps no version either
    first.unlink()
    assert sync_loaders(settings) == ([], [first.with_suffix(".py")])


def test_run_without_the_triggerer_the_task_defers_from_the_worker_while_its_window_is_incomplete(bag, monkeypatch):
    # ``airflow tasks test`` runs ``execute`` in a worker: with nothing landed, it defers on the same wait.
    from airflow.sdk.exceptions import TaskDeferred

    task = bag.dags["q04_cars_per_district"].get_task("evaluate_window")
    monkeypatch.setattr(task, "window_instant", "2010-03-22T08:50:00+00:00")  # as a worker renders it for 08:50
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({})
    assert (deferred.value.method_name, deferred.value.timeout) == ("evaluate", timedelta(minutes=10))
    trigger = deferred.value.trigger
    assert trigger.serialize()[1]["window_instant"] == "2010-03-22T08:50:00+00:00"
    assert trigger.missing() == [f"<{CITY_TOLLGATES}> until 2010-03-22T08:51:00Z (no watermark yet)"]


def test_the_example_dag_files_give_every_registered_query_its_dag_and_the_user_s_own_dag(tmp_path, monkeypatch):
    """``examples/dags/``, as a user copies it into a DAGs folder: the one-line factory file and a DAG of the user's
    own around the operators, parsed by a real DagBag with the per-district count registered."""
    from airflow.dag_processing.dagbag import DagBag

    dags = tmp_path / "dags"
    shutil.copytree(REPOSITORY / "examples" / "dags", dags)
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    register(REPOSITORY / "examples" / "queries" / "04-cars-per-district.rq", settings)
    monkeypatch.setenv("CSPARQL_REGISTRY", str(settings.registry))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(settings.warehouse.root))
    bag = DagBag(str(dags))
    assert bag.import_errors == {}
    assert {"CarsEnteringCityCenterPerDistrict", "district_report"} <= set(bag.dag_ids), sorted(bag.dag_ids)
    report = bag.dags["district_report"]
    assert [t.task_id for t in report.topological_sort()] == ["land_tollgates", "count_per_district", "report"]
