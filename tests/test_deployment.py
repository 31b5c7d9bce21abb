"""The deployment plan of registered queries, without Airflow: names, settings, and what a window waits for."""

from __future__ import annotations

import pytest

from csparql.deployment import RegistrationError, Settings, deployment_of, registry_name

MINUTE = 60_000_000
T0 = 1_269_244_800_000_000  # 2010-03-22T08:00:00Z
PRODUCER = """REGISTER STREAM Busy COMPUTED EVERY 5m AS
CONSTRUCT { ?s <http://example.org/busy> true }
FROM STREAM <http://example.org/in> [RANGE 10m STEP 5m]
WHERE { ?s <http://example.org/p> ?o }
"""
CONSUMER = """REGISTER QUERY Reader AS
SELECT ?s FROM STREAM <urn:csparql:stream:Busy> [RANGE 15m STEP 15m]
FROM STREAM <http://example.org/other> [RANGE 15m STEP 15m]
WHERE { ?s ?p ?o }
"""


@pytest.fixture
def settings(tmp_path):
    (tmp_path / "queries").mkdir()
    return Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "queries"),
                                      "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                      "CSPARQL_ALLOWED_LATENESS": "2m"})


def test_a_window_waits_for_the_ingested_streams_watermark_and_for_every_producer_window_inside_it(settings):
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    reader = deployment_of(settings.registry / "reader.rq", settings)
    needs = reader.requirements(T0 + 30 * MINUTE)
    assert needs.window_end == T0 + 30 * MINUTE
    assert needs.streams == {"http://example.org/other": T0 + 32 * MINUTE}  # window end + allowed lateness
    assert needs.producer_windows == {"busy": [T0 + 20 * MINUTE, T0 + 25 * MINUTE, T0 + 30 * MINUTE]}


def test_settings_refuse_unusable_values_naming_the_variable():
    with pytest.raises(ValueError, match="CSPARQL_SPARK='yarn'"):
        Settings.from_environment({"CSPARQL_SPARK": "yarn"})
    with pytest.raises(ValueError, match="CSPARQL_WAIT_TIMEOUT='soon'"):
        Settings.from_environment({"CSPARQL_WAIT_TIMEOUT": "soon"})


def test_the_maximum_future_skew_is_an_hour_unless_the_environment_says_otherwise():
    assert Settings.from_environment({}).max_future_skew == 60 * MINUTE
    assert Settings.from_environment({"CSPARQL_MAX_FUTURE_SKEW": "2d"}).max_future_skew == 48 * 60 * MINUTE
    with pytest.raises(ValueError, match="CSPARQL_MAX_FUTURE_SKEW='-1h': must not be negative"):
        Settings.from_environment({"CSPARQL_MAX_FUTURE_SKEW": "-1h"})
    with pytest.raises(ValueError, match="CSPARQL_MAX_FUTURE_SKEW='later'"):
        Settings.from_environment({"CSPARQL_MAX_FUTURE_SKEW": "later"})


def test_registry_names_must_be_dag_ids_and_table_names(settings):
    with pytest.raises(RegistrationError, match="'02-cars' cannot name a registered query"):
        registry_name(settings.registry / "02-cars.rq")


def test_a_query_reading_its_own_output_is_refused(settings):
    (settings.registry / "loop.rq").write_text(PRODUCER.replace("<http://example.org/in>", "<urn:csparql:stream:Busy>"))
    with pytest.raises(RegistrationError, match="reads the stream it produces"):
        deployment_of(settings.registry / "loop.rq", settings)


# --- versions --------------------------------------------------------------------------------------------

from csparql.deployment import register, register_text, text_version, unregister, versions  # noqa: E402

QUERY = """REGISTER QUERY Counter AS
SELECT ?s FROM STREAM <http://example.org/in> [RANGE 10m STEP 5m] WHERE { ?s ?p ?o }
"""


def test_every_saved_change_is_a_new_version_and_the_deployment_knows_its_version(settings):
    path = register_text(QUERY.replace("\n", "\r\n"), settings, by="ada")  # a browser's line endings
    assert path.read_text() == QUERY  # stored with LF, so the version does not depend on the browser
    register_text(QUERY, settings)  # the same text again: no new version
    edited = QUERY.replace("?s ?p ?o", "?s <http://example.org/p> ?o")
    register_text(edited, settings, replace=True, by="grace")
    saved = versions("Counter", settings)
    assert [(v.number, v.digest, v.saved_by, v.text) for v in saved] == [
        (1, text_version(QUERY), "ada", QUERY), (2, text_version(edited), "grace", edited)]
    assert deployment_of(path, settings).version == text_version(edited)
    with pytest.raises(RegistrationError, match="a different query is already registered"):
        register_text(QUERY, settings)  # without replace: refused, nothing recorded
    assert len(versions("Counter", settings)) == 2


def test_unregistering_keeps_the_versions_and_registering_again_continues_them(settings):
    register_text(QUERY, settings)
    unregister("Counter", settings)
    assert not (settings.registry / "Counter.rq").exists() and len(versions("Counter", settings)) == 1
    register_text(QUERY.replace("10m", "20m"), settings)
    assert [v.number for v in versions("Counter", settings)] == [1, 2]


def test_a_query_registered_before_versions_were_kept_becomes_version_one_on_its_next_change(settings):
    (settings.registry / "Counter.rq").write_text(QUERY)  # as an older csparql left it
    register_text(QUERY.replace("10m", "20m"), settings, replace=True)
    assert [v.text for v in versions("Counter", settings)] == [QUERY, QUERY.replace("10m", "20m")]


@pytest.mark.parametrize("name", ["../x", "../../etc/passwd", "a/b", "x.rq", ".history", "", " x", "x\n", "a" * 201])
def test_names_with_path_tricks_are_refused_and_nothing_is_written(settings, tmp_path, name):
    source = tmp_path / "q.rq"
    source.write_text(QUERY)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(RegistrationError, match="cannot name a registered query"):
        register_text(QUERY, settings, name=name or "../")
    with pytest.raises(RegistrationError, match="cannot name a registered query"):
        register(source, settings, name=name or "../")
    with pytest.raises(RegistrationError, match="cannot name a registered query"):
        unregister(name or "../", settings)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_refused_query_changes_nothing(settings):
    register_text(QUERY, settings)
    before = {p: p.read_bytes() for p in settings.registry.rglob("*") if p.is_file()}
    with pytest.raises(RegistrationError, match=r"query:2:\d+: error"):
        register_text(QUERY.replace("?s ?p ?o", "?s ?p"), settings, name="Counter", replace=True, source_name="query")
    assert {p: p.read_bytes() for p in settings.registry.rglob("*") if p.is_file()} == before


def _save_concurrently(registry: str, warehouse: str, text: str, barrier) -> None:
    settings = Settings.from_environment({"CSPARQL_REGISTRY": registry, "CSPARQL_WAREHOUSE": warehouse})
    barrier.wait()
    register_text(text, settings, replace=True, by="p")


def test_overlapping_saves_each_get_their_own_version_and_none_is_lost(settings):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    texts = [QUERY.replace("10m", f"{10 + i}m") for i in range(8)]
    barrier = context.Barrier(len(texts))
    processes = [context.Process(target=_save_concurrently,
                                 args=(str(settings.registry), str(settings.warehouse.root), text, barrier))
                 for text in texts]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0] * len(texts)
    saved = versions("Counter", settings)
    assert [v.number for v in saved] == list(range(1, len(texts) + 1))
    assert sorted(v.text for v in saved) == sorted(texts)  # every save kept, each under its own number
    assert (settings.registry / "Counter.rq").read_text() == saved[-1].text  # the registry holds the last one


# --- names SQL can tell apart ----------------------------------------------------------------------------

from csparql.storage import delta, schema  # noqa: E402
from csparql.windows import from_micros  # noqa: E402


def store_answers(settings: Settings, name: str) -> None:
    """Results of ``name`` in the warehouse, as an unregistered ``csparql run --name`` leaves them."""
    import pyarrow as pa

    row = {"window_start": from_micros(T0), "window_end": from_micros(T0 + MINUTE), "answer": True,
           "query_version": None}
    delta.append(settings.warehouse.results(name, "answers"), pa.Table.from_pylist([row], schema=schema.ANSWERS),
                 schema.ANSWERS)


def registry_snapshot(settings: Settings) -> dict:
    return {p: p.read_bytes() for p in settings.registry.rglob("*") if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("other", ["counter", "COUNTER", "counTer"])
def test_a_name_differing_only_in_case_from_a_registered_query_is_refused(settings, tmp_path, other):
    register_text(QUERY, settings)
    before = registry_snapshot(settings)
    with pytest.raises(RegistrationError, match=f"'{other}' collides with the registered query Counter .*"
                                                "result table counter"):
        register_text(QUERY.replace("10m", "20m"), settings, name=other)
    source = tmp_path / f"{other}.rq"
    source.write_text(QUERY.replace("REGISTER QUERY Counter AS\n", ""))
    with pytest.raises(RegistrationError, match="collides with the registered query Counter"):
        register(source, settings)  # the name from the file's stem
    assert registry_snapshot(settings) == before
    # the same spelling is the same query: editing it stays allowed
    register_text(QUERY.replace("10m", "20m"), settings, name="Counter", replace=True)
    assert [v.number for v in versions("Counter", settings)] == [1, 2]


@pytest.mark.parametrize("name", ["runs", "Runs", "statistics", "STATISTICS", "watermarks", "closures",
                                  "stream_tollgates", "Stream_x", "static_city", "STATIC_default"])
def test_names_sql_keeps_for_the_warehouses_own_tables_are_refused(settings, name):
    with pytest.raises(RegistrationError, match=f"'{name}' cannot name a query: "):
        register_text(QUERY, settings, name=name)
    assert registry_snapshot(settings) == {}


def test_a_name_whose_result_tables_overlap_another_querys_is_refused_either_way(settings):
    # a query `a`'s ASK results are the SQL table a_answers, which is also the bindings of a query `a_answers`
    register_text(QUERY, settings, name="a")
    with pytest.raises(RegistrationError, match="'a_answers' collides with the registered query a .*a_answers"):
        register_text(QUERY, settings, name="a_answers")
    unregister("a", settings)
    register_text(QUERY, settings, name="A_Triples")
    with pytest.raises(RegistrationError, match="'a' collides with the registered query A_Triples .*a_triples"):
        register_text(QUERY, settings, name="a")
    register_text(QUERY, settings, name="ab")  # a mere common prefix is no collision


def test_a_name_colliding_with_stored_results_of_another_query_is_refused(settings):
    store_answers(settings, "caseq")  # e.g. written by `csparql run --name caseq`
    with pytest.raises(RegistrationError, match=r"'CaseQ' collides with the stored results of the query caseq "
                                                r"\(.*results/caseq\)"):
        register_text(QUERY, settings, name="CaseQ")
    with pytest.raises(RegistrationError, match="collides with the stored results of the query caseq"):
        register_text(QUERY, settings, name="caseq_triples")
    register_text(QUERY, settings, name="caseq")  # its own results: the same query
    assert (settings.registry / "caseq.rq").exists()


def test_registry_files_dropped_by_hand_with_colliding_names_deploy_only_the_first(settings):
    (settings.registry / "CaseQ.rq").write_text(QUERY)
    (settings.registry / "caseq.rq").write_text(QUERY)
    (settings.registry / "runs.rq").write_text(QUERY)
    assert deployment_of(settings.registry / "CaseQ.rq", settings).name == "CaseQ"
    with pytest.raises(RegistrationError, match="caseq.rq: 'caseq' collides with the registered query CaseQ"):
        deployment_of(settings.registry / "caseq.rq", settings)
    with pytest.raises(RegistrationError, match="runs.rq: 'runs' cannot name a query"):
        deployment_of(settings.registry / "runs.rq", settings)
