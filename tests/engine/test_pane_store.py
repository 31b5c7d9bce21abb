"""The pane store of ``csparql.engine.panes`` over real Delta tables and a real SparkSession: one table per pane
key, hour buckets compacted, old panes pruned by ``csparql vacuum``, late triples recomputing exactly the panes
they reach, ``# csparql panes off`` and the size threshold recomputing — every answer equal to the recompute's.
(Pane results against an independent evaluator, over random windows and data: ``test_panes.py``.)"""

from __future__ import annotations

import time

import pytest
from rdflib import Literal, URIRef

from csparql.cli import main
from csparql.engine import panes as pn
from csparql.engine.runner import Engine
from csparql.engine.panes import PANE_MIN_TRIPLES, pane_min_triples
from csparql.core.panes import ALWAYS, OFF
from csparql.core.frontend import compile_query
from csparql.storage import delta
from csparql.storage.maintenance import delta_tables, prune_panes
from csparql.storage.warehouse import Warehouse
from storage.helpers import write_static, write_stream

EX = "http://example.org/"
STREAM = EX + "posts"
MINUTE = 60_000_000
HOUR = 60 * MINUTE
T0 = 1_600_000_000_000_000 - 1_600_000_000_000_000 % HOUR
QUERY = f"""REGISTER QUERY Topics AS
PREFIX : <{EX}>
SELECT ?label (COUNT(*) AS ?posts) (MAX(?post) AS ?last)
FROM STREAM <{STREAM}> [RANGE 5m STEP 1m]
WHERE {{ ?post :topic ?topic . ?topic :label ?label }}
GROUP BY ?label
"""


def posts(minutes: range, per_minute: int = 3, offset: int = 0) -> list:
    """Posts on three topics, ``per_minute`` a minute, one of them at the end of each minute (a pane's last
    instant) and one repeated from the minute before (a triple in two panes counts once in a window)."""
    triples = []
    for minute in minutes:
        for i in range(per_minute):
            at = T0 + minute * MINUTE + (MINUTE if i == 0 else (i * 7_000_000 + offset))
            triples.append((URIRef(f"{EX}post{minute}-{i}"), URIRef(EX + "topic"), URIRef(f"{EX}t{i % 3}"), at))
        triples.append((URIRef(f"{EX}post{minute - 1}-1"), URIRef(EX + "topic"), URIRef(f"{EX}t1"),
                        T0 + minute * MINUTE + 30_000_000))
    return triples


def rows(evaluation) -> list[tuple]:
    return sorted(tuple(str(term) for term in row) for row in evaluation.result.rows)


@pytest.fixture
def warehouse(tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    write_static(warehouse, None, [(URIRef(f"{EX}t{i}"), URIRef(EX + "label"), Literal(f"topic {i}"))
                                   for i in range(3)])
    write_stream(warehouse, STREAM, posts(range(0, 40)))
    return warehouse


def evaluate_both(engine: Engine, plan, at: int):
    with_panes = engine.evaluate(plan, at, "topics", write=False, panes=ALWAYS)
    recomputed = engine.evaluate(plan, at, "topics", write=False, panes=OFF)
    assert rows(with_panes) == rows(recomputed), f"window ending {at}"
    return with_panes


def test_panes_are_computed_once_and_compacted_per_hour_bucket_with_the_same_answers(spark, warehouse,
                                                                                     monkeypatch):
    monkeypatch.setattr(pn, "COMPACT_FILES", 3)
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    first = evaluate_both(engine, plan, T0 + 5 * MINUTE)
    assert first.panes is not None and (first.panes.panes, first.panes.computed) == (5, 5)
    for minute in range(6, 12):
        evaluation = engine.evaluate(plan, T0 + minute * MINUTE, "topics", write=False, panes=ALWAYS)
        assert (evaluation.panes.panes, evaluation.panes.computed) == (5, 1)
    tables = delta_tables(warehouse.panes("topics"))
    assert len(tables) == 1
    _, files = delta.SNAPSHOTS.snapshot(tables[0])
    per_bucket: dict = {}
    for file in files:
        per_bucket[file.partition.get("bucket")] = per_bucket.get(file.partition.get("bucket"), 0) + 1
    assert per_bucket and all(count < pn.COMPACT_FILES for count in per_bucket.values()), per_bucket
    again = evaluate_both(engine, plan, T0 + 11 * MINUTE)
    assert again.panes.computed == 0


def test_late_triples_recompute_only_the_panes_they_reach(spark, warehouse):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    for minute in range(8, 12):
        engine.evaluate(plan, T0 + minute * MINUTE, "topics", write=False, panes=ALWAYS)
    write_stream(warehouse, STREAM, [(URIRef(EX + "late"), URIRef(EX + "topic"), URIRef(EX + "t2"),
                                      T0 + 8 * MINUTE + 30_000_000)])  # in the pane (8m, 9m] only
    late = evaluate_both(engine, plan, T0 + 11 * MINUTE)
    assert late.panes.computed == 1
    assert ("topic 2",) in {row[:1] for row in rows(late)}


def test_a_new_static_version_is_a_new_pane_key(spark, warehouse):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    before = evaluate_both(engine, plan, T0 + 10 * MINUTE)
    write_static(warehouse, None, [(URIRef(EX + "t0"), URIRef(EX + "label"), Literal("topic zero"))])
    after = evaluate_both(engine, plan, T0 + 10 * MINUTE)
    assert after.panes.key != before.panes.key and after.panes.computed == 5
    assert any(row[0] == "topic zero" for row in rows(after))


def test_replay_computes_every_pane_in_one_job_and_equals_the_recompute(spark, warehouse):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    replayed = list(engine.replay(plan, T0 + 10 * MINUTE, T0 + 14 * MINUTE, "topics", write=False,
                                  panes=ALWAYS))
    assert len(replayed) == 5 and all(e.panes is not None and e.panes.computed == 0 for e in replayed)
    for evaluation in replayed:
        assert rows(evaluation) == rows(engine.evaluate(plan, evaluation.window.end, "topics", write=False,
                                                        panes=OFF))


DISTINCT_QUERY = QUERY.replace("SELECT ?label (COUNT(*) AS ?posts) (MAX(?post) AS ?last)", "SELECT DISTINCT ?label") \
    .replace("GROUP BY ?label", "")


def test_auto_recomputes_keyed_partials_and_small_windows_and_off_recomputes_and_nothing_is_stored(spark, warehouse):
    keyed, distinct = compile_query(QUERY), compile_query(DISTINCT_QUERY)
    at = T0 + 5 * MINUTE
    assert Engine(warehouse, spark, pane_min_triples=0).evaluate(keyed, at, "topics", write=False).panes is None
    assert Engine(warehouse, spark).evaluate(distinct, at, "topics", write=False).panes is None  # 160 triples
    assert Engine(warehouse, spark, pane_min_triples=0).evaluate(distinct, at, "topics", write=False,
                                                                 panes=OFF).panes is None
    assert not warehouse.panes("topics").exists()
    chosen = Engine(warehouse, spark, pane_min_triples=100).evaluate(distinct, at, "topics", write=False)
    assert chosen.panes is not None and chosen.panes.computed == 5


def test_the_threshold_is_read_from_the_environment_and_checked(monkeypatch):
    monkeypatch.setenv("CSPARQL_PANES_MIN_TRIPLES", "250")
    assert pane_min_triples() == 250 and Engine(Warehouse("unused")).pane_min_triples == 250
    monkeypatch.setenv("CSPARQL_PANES_MIN_TRIPLES", "many")
    with pytest.raises(ValueError, match="CSPARQL_PANES_MIN_TRIPLES='many' is not a whole number"):
        pane_min_triples()
    monkeypatch.delenv("CSPARQL_PANES_MIN_TRIPLES")
    assert pane_min_triples() == PANE_MIN_TRIPLES


def test_vacuum_prunes_old_panes_and_they_are_computed_again(spark, warehouse, capsys):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    expected = rows(evaluate_both(engine, plan, T0 + 30 * MINUTE))
    assert [p.files for p in prune_panes(warehouse.panes_root, T0 + 2 * HOUR, dry_run=True)] == [0]  # written now
    dry = prune_panes(warehouse.panes_root, time.time_ns() // 1000 + 1, dry_run=True)
    assert len(dry) == 1 and dry[0].files > 0
    assert main(["vacuum", "--warehouse", str(warehouse.root), "--retain", "1h"]) == 0
    assert "of panes" not in capsys.readouterr().out  # panes written within the retention are kept
    assert main(["vacuum", "--warehouse", str(warehouse.root), "--retain", "0h", "--force"]) == 0
    assert "of panes written more than the retention ago" in capsys.readouterr().out
    again = evaluate_both(engine, plan, T0 + 30 * MINUTE)
    assert again.panes.computed == 5 and rows(again) == expected
