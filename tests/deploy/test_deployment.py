"""The deployment plan of registered queries, without Airflow: names, settings, and what a window waits for."""

from __future__ import annotations

import pytest

from csparql.deploy.plan import deployment_of
from csparql.deploy.registry import RegistrationError, registry_name
from csparql.deploy.settings import Settings

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


def test_the_triggerer_evaluates_two_windows_at_a_time_unless_told_a_whole_number_of_at_least_one():
    assert Settings.from_environment({}).triggerer_evaluations == 2
    assert Settings.from_environment({"CSPARQL_TRIGGERER_EVALUATIONS": " 6 "}).triggerer_evaluations == 6
    assert Settings.from_environment({}).triggerer_windows_per_job == 1
    assert Settings.from_environment({"CSPARQL_TRIGGERER_WINDOWS_PER_JOB": "6"}).triggerer_windows_per_job == 6
    with pytest.raises(ValueError, match="CSPARQL_TRIGGERER_EVALUATIONS='0': must be at least 1"):
        Settings.from_environment({"CSPARQL_TRIGGERER_EVALUATIONS": "0"})
    with pytest.raises(ValueError, match="CSPARQL_TRIGGERER_EVALUATIONS='many': not a whole number"):
        Settings.from_environment({"CSPARQL_TRIGGERER_EVALUATIONS": "many"})


def test_no_api_connection_unless_one_is_named():
    assert Settings.from_environment({}).api_conn_id is None
    assert Settings.from_environment({"CSPARQL_API_CONN_ID": " airflow_api "}).api_conn_id == "airflow_api"


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

from csparql.deploy.history import text_version, versions  # noqa: E402
from csparql.deploy.registration import register, register_text, unregister  # noqa: E402

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
from csparql.core.windows import from_micros  # noqa: E402


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


@pytest.mark.parametrize(("name", "clash"), [
    ("stale_windows", "the warehouse's stale_windows table (_csparql/stale_windows)"),
    ("Stale_Windows", "the warehouse's stale_windows table (_csparql/stale_windows)"),
    ("panes", "the warehouse's panes folder (_csparql/panes)"),
    ("query_facts", "the warehouse's query_facts folder (_csparql/query_facts)"),
    ("information_schema", "a catalog or schema name of SQL (information_schema)"),
    ("datafusion", "a catalog or schema name of SQL (datafusion)"),
    ("PUBLIC", "a catalog or schema name of SQL (public)"),
])
def test_every_internal_table_folder_and_sql_schema_name_is_refused_naming_the_clash(settings, name, clash):
    with pytest.raises(RegistrationError) as refused:
        register_text(QUERY, settings, name=name)
    assert str(refused.value).endswith(
        f"'{name}' cannot name a query: its results would be the SQL table {name.lower()}, which is {clash}; the "
        "name is reserved (SQL compares table names in lower case); choose another name")
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


# --- each registry file compiled once per content -------------------------------------------------------

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
from collections import Counter  # noqa: E402

from csparql.deploy import registry as registry_module  # noqa: E402
from csparql.core import frontend as frontend_module  # noqa: E402
from csparql.deploy.plan import ingested_streams  # noqa: E402
from csparql.deploy.registry import code_version, producers_of  # noqa: E402
from csparql.core.frontend import compile_query  # noqa: E402


def chain_registry(settings: Settings, length: int) -> list:
    """``length`` registry files, each reading the stream the one before it registers (the first reads an
    ingested stream); every second one also reads a stream of its own."""
    paths = []
    for i in range(length):
        source = "<http://example.org/in>" if i == 0 else f"<urn:csparql:stream:S{i - 1}>"
        extra = f"FROM STREAM <http://example.org/extra{i}> [RANGE 5m STEP 5m]\n" if i % 2 else ""
        path = settings.registry / f"q{i:02}.rq"
        path.write_text(f"REGISTER STREAM S{i} COMPUTED EVERY 5m AS\nCONSTRUCT {{ ?s <http://example.org/p{i}> ?o }}\n"
                        f"FROM STREAM {source} [RANGE 10m STEP 5m]\n{extra}WHERE {{ ?s ?p ?o }}\n")
        paths.append(path)
    return paths


@pytest.fixture
def compiles(monkeypatch):
    """Counts ``compile_query`` calls of the deployment layer, per source name (the registry imports it from
    ``csparql.core.frontend`` when it compiles)."""
    calls: Counter = Counter()
    real = frontend_module.compile_query

    def counting(text, source_name="<query>"):
        calls[source_name] += 1
        return real(text, source_name)

    monkeypatch.setattr(frontend_module, "compile_query", counting)
    return calls


def fresh_process(monkeypatch) -> None:
    """Forget what this process compiled, as in each process Airflow's DAG processor forks to parse one DAG
    file: only the warehouse's compile cache remains."""
    monkeypatch.setattr(registry_module, "_COMPILED", {})
    monkeypatch.setattr(registry_module, "_FACTS", {})


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def facts_files(settings: Settings) -> list:
    return sorted((settings.warehouse.query_facts / code_version()).glob("*.json"))


def test_building_every_deployment_of_a_registry_compiles_each_file_once(settings, compiles):
    paths = chain_registry(settings, 12)
    deployments = [deployment_of(path, settings) for path in paths]
    assert ingested_streams(settings) == ["http://example.org/extra1", "http://example.org/extra11",
                                          "http://example.org/extra3", "http://example.org/extra5",
                                          "http://example.org/extra7", "http://example.org/extra9",
                                          "http://example.org/in"]
    assert compiles == Counter({path.name: 1 for path in paths})  # 12, not 12 × 13
    assert [d.inputs[0].producer for d in deployments] == [None] + [f"q{i:02}" for i in range(11)]
    assert deployments[3].plan is deployment_of(paths[3], settings).plan  # one plan per content, shared


def test_each_process_of_the_dag_processor_compiles_nothing_once_the_facts_are_kept(
        settings, compiles, monkeypatch):
    paths = chain_registry(settings, 12)
    first_loop = []
    for path in paths:  # one parsing loop of Airflow's DAG processor: a fresh process per DAG file
        fresh_process(monkeypatch)
        deployment_of(path, settings)
        first_loop.append(sum(compiles.values()))
        compiles.clear()
    assert first_loop == [12] + [0] * 11  # the first one compiles the registry and keeps its facts
    assert len(facts_files(settings)) == 12
    for path in paths:  # the next loop: a DAG is built from the kept facts, compiling nothing
        fresh_process(monkeypatch)
        deployment = deployment_of(path, settings)
        assert not compiles
        assert deployment.plan.registration.name == f"S{paths.index(path)}"  # an evaluation compiles its own
        assert compiles == Counter({path.name: 1})
        compiles.clear()
    assert deployment.inputs[0].producer == "q10" and deployment.inputs[0].producer_schedule.period == 5 * MINUTE
    fresh_process(monkeypatch)
    assert len(ingested_streams(settings)) == 7 and not compiles  # the ingestion DAGs' file compiles nothing


def test_an_edited_or_removed_registry_file_changes_what_the_other_deployments_see(settings, monkeypatch):
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    reader = settings.registry / "reader.rq"

    def producer_of_busy(fresh: bool) -> str | None:
        if fresh:
            fresh_process(monkeypatch)
        inputs = {s.iri: s for s in deployment_of(reader, settings).inputs}
        return inputs["urn:csparql:stream:Busy"].producer

    for fresh in (False, True):
        busy = settings.registry / "busy.rq"
        busy.write_text(PRODUCER)
        assert producer_of_busy(fresh) == "busy"
        assert "urn:csparql:stream:Busy" not in ingested_streams(settings)
        # the same size and modification time, another content: it now registers another stream
        stat = busy.stat()
        busy.write_text(PRODUCER.replace("Busy", "Bust"))
        os.utime(busy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert busy.stat().st_size == stat.st_size
        assert producer_of_busy(fresh) is None
        assert "urn:csparql:stream:Busy" in ingested_streams(settings)
        assert set(producers_of(settings)) == {"urn:csparql:stream:Bust"}
        busy.write_text(PRODUCER)  # back: the producer again
        assert producer_of_busy(fresh) == "busy"
        busy.write_text(PRODUCER.replace("CONSTRUCT", "CONSTRUCT CONSTRUCT"))  # it no longer parses
        assert producer_of_busy(fresh) is None
        busy.write_text(PRODUCER)
        assert producer_of_busy(fresh) == "busy"
        busy.unlink()
        assert producer_of_busy(fresh) is None
        assert producers_of(settings) == {}


def test_a_registry_file_that_does_not_parse_is_reported_by_its_own_deployment_every_time(settings, monkeypatch):
    (settings.registry / "busy.rq").write_text(PRODUCER.replace("CONSTRUCT", "SELECT"))
    (settings.registry / "reader.rq").write_text(CONSUMER)
    assert deployment_of(settings.registry / "reader.rq", settings).inputs[0].producer is None
    for fresh in (False, True, False):  # compiled here, kept as "does not compile", compiled again
        if fresh:
            fresh_process(monkeypatch)
        with pytest.raises(RegistrationError, match=r"busy.rq: \nbusy.rq:2:13: error: unexpected '<http://example"
                                                    r".org/busy>'.*\n.*\n    \|             \^\^\^"):
            deployment_of(settings.registry / "busy.rq", settings)
        assert ingested_streams(settings) == ["http://example.org/other", "urn:csparql:stream:Busy"]


def test_a_registry_files_settings_lines_are_kept_with_its_facts_and_a_fresh_process_reads_neither(
        settings, compiles, monkeypatch):
    from csparql.deploy import file_settings

    (settings.registry / "busy.rq").write_text("# csparql panes off\n# csparql revision-horizon 2h\n" + PRODUCER)
    first = deployment_of(settings.registry / "busy.rq", settings)
    fresh_process(monkeypatch)
    file_settings._file_settings.cache_clear()
    read = []
    real = file_settings._file_settings
    monkeypatch.setattr(file_settings, "_file_settings", lambda text: read.append(text) or real(text))
    compiles.clear()
    again = deployment_of(settings.registry / "busy.rq", settings)
    assert (first.panes, first.revision_horizon) == (again.panes, again.revision_horizon) == ("off", 2 * 60 * MINUTE)
    assert read == [] and not compiles  # from the warehouse's facts: neither compiled nor its lines read


def test_a_registry_file_with_a_bad_settings_line_is_refused_by_its_own_deployment_every_time(settings, monkeypatch):
    (settings.registry / "busy.rq").write_text("# csparql panes sometimes\n" + PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    assert deployment_of(settings.registry / "reader.rq", settings).inputs[0].producer is None
    for fresh in (False, True, False):
        if fresh:
            fresh_process(monkeypatch)
        with pytest.raises(RegistrationError, match=r"busy.rq: line 1: '# csparql panes' takes auto, always \(on\) "
                                                    r"or off, not 'sometimes'"):
            deployment_of(settings.registry / "busy.rq", settings)


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # cut short
    lambda text: "",
    lambda text: "\x00\xff garbage",
    lambda text: "[]",
    lambda text: text.replace('"compiles": true', '"compiles": "yes"'),
    lambda text: text.replace('"urn:csparql:stream:Busy"', "42"),
    lambda text: text.replace('"period": 300000000', '"period": "300000000"'),
    lambda text: text.replace('"range": 600000000', '"range": -1'),
    lambda text: text.replace('"digest": "', '"digest": "0'),
    lambda text: text.replace('"panes": null', '"panes": "sometimes"'),
    lambda text: text.replace('"revision_horizon": null', '"revision_horizon": -1'),
], ids=["cut-short", "empty", "garbage", "not-an-object", "compiles", "output-stream", "period", "range",
        "digest", "panes", "revision-horizon"])
def test_a_damaged_cache_file_is_ignored_recomputed_and_replaced(settings, compiles, monkeypatch, damage):
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    deployment_of(settings.registry / "reader.rq", settings)
    facts = settings.warehouse.query_facts / code_version() / f"{text_digest(PRODUCER)}.json"
    kept = facts.read_text()
    facts.write_text(damage(kept))
    fresh_process(monkeypatch)
    compiles.clear()
    (busy,) = [s for s in deployment_of(settings.registry / "reader.rq", settings).inputs if s.producer]
    assert busy.producer == "busy" and busy.producer_schedule.period == 5 * MINUTE
    assert compiles == Counter({"busy.rq": 1})  # busy.rq compiled again; reader.rq's DAG needs only its facts
    assert json.loads(facts.read_text()) == json.loads(kept)


def test_a_cache_that_cannot_be_written_only_costs_compiling_again(settings, compiles, monkeypatch):
    settings.warehouse.query_facts.parent.mkdir(parents=True)
    settings.warehouse.query_facts.write_text("not a folder")  # like a read-only warehouse: no file can be made
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    for _ in range(2):
        fresh_process(monkeypatch)
        assert deployment_of(settings.registry / "reader.rq", settings).inputs[0].producer == "busy"
    assert compiles == Counter({"reader.rq": 2, "busy.rq": 2})


def test_facts_of_other_code_are_not_read_and_are_removed_once_this_code_keeps_its_own(settings, compiles):
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    other_code = settings.warehouse.query_facts / "0123456789abcdef"
    other_code.mkdir(parents=True)
    for text in (PRODUCER, CONSUMER):  # facts another compiler made: nothing produces anything
        digest = text_digest(text)
        (other_code / f"{digest}.json").write_text(json.dumps({"digest": digest, "compiles": False}))
    assert deployment_of(settings.registry / "reader.rq", settings).inputs[0].producer == "busy"
    assert compiles == Counter({"reader.rq": 1, "busy.rq": 1})
    assert not other_code.exists() and len(facts_files(settings)) == 2


def _store_repeatedly(settings: Settings, digest: str, facts, stop: threading.Event) -> None:
    while not stop.is_set():
        registry_module.store_facts(digest, facts, settings)


def test_concurrent_writers_of_the_cache_never_let_a_reader_see_half_a_file(settings):
    digest = text_digest(PRODUCER)
    facts = registry_module.QueryFacts.of(compile_query(PRODUCER))
    registry_module.store_facts(digest, facts, settings)
    stop = threading.Event()
    writers = [threading.Thread(target=_store_repeatedly, args=(settings, digest, facts, stop)) for _ in range(4)]
    for writer in writers:
        writer.start()
    try:
        reads = [registry_module._stored_facts(digest, settings) for _ in range(2000)]
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert set(reads) == {(True, facts)}
    assert [p.name for p in (settings.warehouse.query_facts / code_version()).iterdir()] == [f"{digest}.json"]
