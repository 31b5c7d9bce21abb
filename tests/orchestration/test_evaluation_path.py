"""One evaluation path: the window task in a worker, the spark-submit job and the trigger that evaluates on the
triggerer all run the same step (``csparql.jobs.evaluation``), so the staleness check promised after every
evaluation runs on each of them. Real Spark (the suite's session), real Delta tables and registry; the job is
run in this process as spark-submit runs it (its ``main``), printing its ``CSPARQL_RESULT`` line."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

import csparql
from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register_text
from csparql.deploy.settings import Settings
from csparql.engine.runner import Engine
from csparql.ingest.ingest import ingest_stream
from csparql.jobs.evaluate_window import RESULT_PREFIX
from csparql.storage import stale_windows as sw
from csparql.core.windows import format_instant

pytestmark = pytest.mark.spark

EX = "http://example.org/path/"
GATES = EX + "gates"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)
CENTURY = 100 * 365 * 24 * 60 * MINUTE  # a revision horizon that keeps every window of the test pending
PRODUCER = f"""REGISTER STREAM PathPassages AS
PREFIX ex: <{EX}>
CONSTRUCT {{ ?car ex:passed ?gate }}
FROM STREAM <{GATES}> [RANGE 20m TUMBLING]
WHERE {{ ?gate ex:registers ?car }}
"""
CONSUMER = f"""REGISTER QUERY PathGateCounts AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <urn:csparql:stream:PathPassages> [RANGE 20m TUMBLING]
WHERE {{ ?car ex:passed ?gate }}
GROUP BY ?gate
"""
ORCHESTRATION = Path(csparql.__file__).parent / "orchestration"


@pytest.fixture
def chain(spark, tmp_path):
    """A REGISTER STREAM query and its consumer, registered; the producer's window ending T0+20m evaluated,
    then the consumer's: a new evaluation of the producer's window rewrites the consumer's input."""
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                          "CSPARQL_REVISION_HORIZON": "36500d"})
    (tmp_path / "registry").mkdir()
    register_text(PRODUCER, settings, name="path_producer")
    register_text(CONSUMER, settings, name="path_consumer")
    (tmp_path / "gates.nq").write_text("".join(
        f'<{EX}g{i % 2}> <{EX}registers> <{EX}c{i}> "{format_instant(T0 + (i + 1) * MINUTE)}"'
        f'^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n' for i in range(5)), encoding="utf-8")
    ingest_stream(spark, settings.warehouse, GATES, [tmp_path / "gates.nq"])
    producer = deployment_of(settings.registry / "path_producer.rq", settings)
    consumer = deployment_of(settings.registry / "path_consumer.rq", settings)
    engine = Engine(settings.warehouse, spark)
    engine.evaluate(producer.plan, T0 + 20 * MINUTE, producer.name, version=producer.version)
    engine.evaluate(consumer.plan, T0 + 20 * MINUTE, consumer.name, version=consumer.version)
    assert sw.stale_windows(settings.warehouse, "path_consumer") == []
    return settings, producer


def consumer_windows_found_stale(settings: Settings) -> list[tuple[int, str]]:
    return [(w.window_end, w.status) for w in sw.stale_windows(settings.warehouse, "path_consumer")]


@pytest.mark.parametrize("given", ["arguments", "environment"])
def test_the_spark_submit_job_checks_staleness_after_its_evaluation_and_reports_what_it_found(
        chain, capsys, monkeypatch, given):
    """The job evaluates the producer's window again: its output commit makes the consumer's window stale, which
    the job records and prints for the task that submitted it to announce (before, the job ran no check). The
    registry and the revision horizon come from its arguments (as the task passes them), else from
    ``CSPARQL_REGISTRY`` and ``CSPARQL_REVISION_HORIZON``."""
    from csparql.jobs.evaluate_window import main

    settings, producer = chain
    arguments = ["--query", str(producer.path), "--name", producer.name, "--at", str(T0 + 20 * MINUTE),
                 "--warehouse", str(settings.warehouse.root), "--complete", "true"]
    if given == "arguments":
        arguments += ["--registry", str(settings.registry), "--revision-horizon", str(CENTURY)]
    else:
        monkeypatch.setenv("CSPARQL_REGISTRY", str(settings.registry))
        monkeypatch.setenv("CSPARQL_REVISION_HORIZON", "36500d")

    status = main(arguments)

    out, err = capsys.readouterr()
    assert status == 0, err
    assert consumer_windows_found_stale(settings) == [(T0 + 20 * MINUTE, sw.PENDING)]
    from csparql.jobs.evaluation import stale_windows_of

    [line] = [line for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
    record = json.loads(line.removeprefix(RESULT_PREFIX))
    assert [(w.query, w.window_end, w.status) for w in stale_windows_of(record)] == [
        ("path_consumer", T0 + 20 * MINUTE, sw.PENDING)]
    assert (record["window_end"], record["complete"], record["query_version"]) == (
        T0 + 20 * MINUTE, True, producer.version)


def test_the_window_task_checks_staleness_through_the_same_step(chain):
    """The operator's own evaluation (a local Spark here; Spark Connect the same way) finds the same."""
    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

    settings, producer = chain
    operator = CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=producer, settings=settings)

    record = operator._evaluate_here(settings, T0 + 20 * MINUTE, True)

    assert consumer_windows_found_stale(settings) == [(T0 + 20 * MINUTE, sw.PENDING)]
    from csparql.jobs.evaluation import stale_windows_of

    assert [(w.query, w.window_end) for w in stale_windows_of(record)] == [("path_consumer", T0 + 20 * MINUTE)]
    assert operator.lineage is not None and operator.lineage.outputs  # lineage from the same evaluation


def orchestration_imports() -> dict[str, set[str]]:
    """Each module of ``csparql.orchestration`` and the modules of it that it imports, also inside functions."""
    graph = {}
    for path in sorted(ORCHESTRATION.glob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("csparql.orchestration"):
                names.add(node.module.rsplit(".", 1)[-1])
                names.update(alias.name for alias in node.names if (ORCHESTRATION / f"{alias.name}.py").exists())
            elif isinstance(node, ast.Import):
                names.update(a.name.rsplit(".", 1)[-1] for a in node.names if a.name.startswith("csparql.orchestration."))
        graph[path.stem] = names - {path.stem, "orchestration"}
    return graph


def test_the_airflow_layer_has_no_import_cycle_even_through_imports_inside_functions():
    graph = orchestration_imports()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(name == goal or (name not in seen and reaches(name, goal, seen | {name}))
                   for name in graph.get(start, ()))

    assert sorted(module for module in graph if reaches(module, module, {module})) == []


def test_the_log_line_of_an_evaluation_gives_its_phases_when_its_record_has_them():
    """What the task log says of an evaluation: the window, the rows, the time and where it went (a record of
    an earlier version, without phases, reads as before)."""
    from csparql.jobs.evaluation import describe

    record = {"window_start": T0, "window_end": T0 + MINUTE, "rows_written": 3, "duration_ms": 706,
              "phases_ms": {"lost runs": 18, "plan": 150, "spark": 270, "write": 28}}
    window = f"window ({format_instant(T0)}, {format_instant(T0 + MINUTE)}]: 3 row(s) written in 706 ms"
    assert describe(record) == f"{window} (lost runs 18 ms, plan 150 ms, spark 270 ms, write 28 ms)"
    assert describe({key: value for key, value in record.items() if key != "phases_ms"}) == window


def test_a_complete_window_records_when_its_last_input_was_committed(chain, spark):
    """The runs row of a window evaluated complete says when the last of its inputs was committed: the
    watermark that completed an ingested stream (its ``recorded_at``), the end of the first successful run of
    each producer window it reads; so ``started_at - inputs_complete_at`` is how long the window waited after
    its data was there. A window evaluated incomplete records none."""
    from csparql.jobs.evaluation import evaluate_deployment_window
    from csparql.storage import delta, schema
    from csparql.storage.instants import micros_of
    from csparql.storage.watermarks import advance_watermark

    settings, producer = chain
    consumer = deployment_of(settings.registry / "path_consumer.rq", settings)
    engine, at = Engine(settings.warehouse, spark), T0 + 20 * MINUTE
    ((stream, threshold),) = producer.requirements(at).streams.items()
    advance_watermark(settings.warehouse, stream, threshold, "test")
    [mark] = [row for row in delta.SNAPSHOTS.rows(settings.warehouse.watermarks, schema.WATERMARKS).to_pylist()
              if row["source"] == "test"]
    [first_producer_run] = delta.SNAPSHOTS.rows(settings.warehouse.runs, schema.RUNS).filter(
        pc.equal(pc.field("query"), "path_producer")).to_pylist()

    runs = [evaluate_deployment_window(engine, producer, settings, at, True).evaluation.run_id,
            evaluate_deployment_window(engine, consumer, settings, at, True).evaluation.run_id,
            evaluate_deployment_window(engine, consumer, settings, at, False).evaluation.run_id]

    rows = {row["run_id"]: row for row in delta.SNAPSHOTS.rows(settings.warehouse.runs, schema.RUNS).to_pylist()}
    recorded = [rows[run]["inputs_complete_at"] for run in runs]
    producer_ended = micros_of(first_producer_run["started_at"]) + first_producer_run["duration_ms"] * 1000
    assert [micros_of(recorded[0]), micros_of(recorded[1]), recorded[2]] == [
        micros_of(mark["recorded_at"]), producer_ended, None]
    assert all(micros_of(rows[run]["started_at"]) >= micros_of(value) for run, value in zip(runs, recorded[:2]))
