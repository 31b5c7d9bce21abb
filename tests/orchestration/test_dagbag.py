"""The registry as Airflow's DAG processor sees it: every example query registered, parsed by a real DagBag."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from csparql import deployment
from csparql.compiler import compile_query
from csparql.deployment import RegistrationError, Settings, register, sync_loaders, versions, write_loader
from csparql.language.errors import QueryError

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPOSITORY / "examples" / "queries").glob("*.rq"))


def registry_stem(example: Path) -> str:
    return "q" + re.sub(r"[^A-Za-z0-9_]", "_", example.stem)


def is_valid(example: Path) -> bool:
    try:
        compile_query(example.read_text(encoding="utf-8"), example.name)
    except QueryError:
        return False
    return True


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
    monkey.setattr(deployment, "compile_query", counting_compile_query)
    COMPILES.clear()
    yield DagBag(str(dags_folder))
    monkey.undo()


def test_one_dag_per_valid_example_and_one_import_error_for_the_invalid_one(bag):
    valid = {registry_stem(e) for e in EXAMPLES if is_valid(e)}
    invalid = [e for e in EXAMPLES if not is_valid(e)]
    assert len(valid) == 16 and len(invalid) == 1
    assert {d for d in bag.dag_ids if not d.startswith("ingest_")} == valid
    assert len(bag.import_errors) == 1
    (loader, message), = bag.import_errors.items()
    assert loader.endswith(f"{registry_stem(invalid[0])}.py")
    assert f"{registry_stem(invalid[0])}.rq:7:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in message
    assert "^^^^^^" in message  # the caret under SELECT


def test_parsing_the_whole_registry_compiles_each_query_once(bag):
    assert COMPILES == Counter({f"{registry_stem(e)}.rq": 1 for e in EXAMPLES})  # not once per DAG file


def test_a_dag_processor_process_per_file_compiles_only_its_own_query_once_the_facts_are_kept(dags_folder, tmp_path):
    # Airflow 3's DAG processor parses each DAG file in a process it forks for that file: nothing compiled in
    # one survives to the next but the warehouse's compile cache. Two parsing loops, each file in a fresh state.
    from airflow.dag_processing.dagbag import DagBag

    files = [dags_folder / "csparql_streams.py", *sorted((dags_folder / "queries").glob("*.py"))]
    monkey = pytest.MonkeyPatch()
    monkey.setattr(deployment, "compile_query", counting_compile_query)
    monkey.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "warehouse"))  # a cold compile cache
    try:
        loops = []
        for _ in range(2):
            per_file = {}
            for file in files:
                monkey.setattr(deployment, "_COMPILED", {})
                monkey.setattr(deployment, "_FACTS", {})
                COMPILES.clear()
                parsed = DagBag(str(file))
                per_file[file.stem] = (dict(COMPILES), len(parsed.dags), list(parsed.import_errors.values()))
            loops.append(per_file)
    finally:
        monkey.undo()
    queries = [file.stem for file in files[1:]]
    invalid = next(registry_stem(e) for e in EXAMPLES if not is_valid(e))
    first, second = loops
    assert first["csparql_streams"][:2] == ({f"{q}.rq": 1 for q in queries}, 6)  # the first compiles them all
    for loop in loops:
        for query in queries:  # then each process compiles its own query only, the ingestion DAGs' none
            compiled, dags, errors = loop[query]
            assert compiled == {f"{query}.rq": 1} and dags == (0 if query == invalid else 1)
        (error,) = loop[invalid][2]  # the invalid query's import error, as when it was compiled by others
        assert f"{invalid}.rq:7:1: error: only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in error
    assert second["csparql_streams"] == ({}, 6, [])


def test_each_query_dag_waits_then_evaluates_on_its_schedule(bag):
    dag = bag.dags["q04_cars_per_district"]
    assert [t.task_id for t in dag.topological_sort()] == ["await_window", "evaluate_window"]
    assert dag.get_task("evaluate_window").pool == "csparql_spark"
    assert type(dag.timetable).__name__ == "WindowTimetable"
    assert dag.timetable.schedule.period == 5 * 60 * 1_000_000
    assert bag.dags["q01_sensors_per_street"].timetable.can_be_scheduled is False  # one-shot: on demand


def test_a_register_stream_query_produces_an_asset(bag):
    evaluate = bag.dags["q07_register_stream_construct"].get_task("evaluate_window")
    assert [o.uri for o in evaluate.outlets] == ["csparql://streams/CarsEnteringCityCenterPerDistrict"]


def test_every_stream_the_queries_read_gets_an_ingestion_dag(bag):
    ingest = sorted(d for d in bag.dag_ids if d.startswith("ingest_"))
    assert len(ingest) == 6  # milan, uc.eu, city tollgates, city cameras, market, getglue
    assert all(bag.dags[d].get_task("ingest_landed_files").stream for d in ingest)


def test_every_task_is_retried_so_that_a_transient_airflow_error_does_not_fail_its_run(bag):
    # an ingest whose files landed can still fail when the api-server times out (SQLite under load); its retry
    # finds nothing waiting and succeeds
    tasks = [bag.dags[d].get_task("ingest_landed_files") for d in bag.dag_ids if d.startswith("ingest_")]
    tasks += [bag.dags["q04_cars_per_district"].get_task(t) for t in ("await_window", "evaluate_window")]
    assert {(t.retries, t.retry_delay.total_seconds()) for t in tasks} == {(Settings.retries, 30.0)}


def test_register_refuses_a_second_producer_of_the_same_stream_and_keeps_the_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("CSPARQL_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "warehouse"))
    settings = Settings.from_environment()
    construct = REPOSITORY / "examples" / "queries" / "07-register-stream-construct.rq"
    first = register(construct, settings)
    assert first.name == "CarsEnteringCityCenterPerDistrict.rq" and first.with_suffix(".py").exists()
    with pytest.raises(RegistrationError, match="already produced by CarsEnteringCityCenterPerDistrict.rq"):
        register(construct, settings, name="Copy")
    assert sorted(p.name for p in settings.registry.iterdir() if not p.name.startswith(".")) == [
        "CarsEnteringCityCenterPerDistrict.py", "CarsEnteringCityCenterPerDistrict.rq"]
    assert [v.number for v in versions("CarsEnteringCityCenterPerDistrict", settings)] == [1]
    assert versions("Copy", settings) == []  # a refused registration keeps no version either
    first.unlink()
    assert sync_loaders(settings) == ([], [first.with_suffix(".py")])
