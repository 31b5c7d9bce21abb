"""``storage.stream_compaction``: a stream landed every few seconds keeps a file per closed minute, with the
same rows, the same windows (checked against pyoxigraph) and the same commits for the staleness checks."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.ingest.ingest import ingest_stream
from csparql.storage import delta
from csparql.storage.pruning import FileInfo
from csparql.storage.stale_windows import stream_commits
from csparql.storage.stream_compaction import COMPACTION_SPAN_MICROS, SMALL_FILE_BYTES, closed_span_groups
from csparql.storage.tables import OPERATION
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant

from conformance import reference
from ingest.test_ingest import rows_of

MINUTE = COMPACTION_SPAN_MICROS
START = 1_269_252_000_000_000  # 2010-03-22T10:00:00Z, a whole minute
STREAM = "http://streams.org/gates"
EX = "http://ex.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"


def _file(name: str, first: int, last: int, size: int = 1_000, bucket: str = "20100322T10") -> FileInfo:
    return FileInfo(f"/t/{name}", size, 10, first, last, {"bucket": bucket})


def _names(groups) -> dict:
    return {start: sorted(Path(f.uri).name for f in group) for (_, start), group in groups.items()}


def test_the_small_files_of_each_closed_minute_make_a_group_and_the_minute_still_filling_none():
    files = [_file("a", START, START + 4_000_000), _file("b", START + 5_000_000, START + 9_000_000),
             _file("c", START + MINUTE, START + MINUTE + 1), _file("d", START + MINUTE + 5, START + MINUTE + 9),
             _file("e", START + 2 * MINUTE, START + 2 * MINUTE + 5)]
    assert _names(closed_span_groups(files)) == {START: ["a", "b"], START + MINUTE: ["c", "d"]}
    # the latest minute closes once a later triple has landed
    assert _names(closed_span_groups(files[:4])) == {START: ["a", "b"]}
    # a group is in time order, whatever the order of the log: the merged file's rows are
    assert [[Path(f.uri).name for f in group] for group in closed_span_groups(files[::-1]).values()] == [
        ["c", "d"], ["a", "b"]]


def test_large_files_files_across_a_minute_lone_files_and_other_partitions_are_left_alone():
    files = [_file("small", START, START + 1), _file("large", START + 2, START + 3, size=SMALL_FILE_BYTES),
             _file("across", START + 10, START + MINUTE + 10), _file("lone", START + MINUTE + 20, START + MINUTE + 30),
             _file("other", START + 40, START + 50, bucket="20100322T11"),
             _file("unknown", None, None), _file("later", START + 3 * MINUTE, START + 3 * MINUTE)]
    assert closed_span_groups(files) == {}
    both = [*files, _file("small2", START + 5, START + 6)]
    assert _names(closed_span_groups(both)) == {START: ["small", "small2"]}


def test_minutes_before_the_epoch_are_aligned_as_the_others():
    before = -MINUTE  # 1969-12-31T23:59:00Z
    files = [_file("a", before + 1, before + 2), _file("b", before + 3, MINUTE // 2 - MINUTE - 1),
             _file("c", 5, 6)]
    assert _names(closed_span_groups(files)) == {before: ["a", "b"]}


def _landing(number: int, at: int, chosen: random.Random) -> list[tuple[str, str, object, int]]:
    """One landing's passages: a few cars at gates, and some cars' colours, within a second of ``at``."""
    triples = []
    for index in range(chosen.randrange(2, 6)):
        car, when = f"{EX}car{number}_{index}", at + chosen.randrange(0, 1_000_000)
        triples.append((f"{EX}gate{chosen.randrange(4)}", f"{EX}registers", car, when))
        if chosen.random() < 0.7:
            triples.append((car, f"{EX}colour", chosen.choice(["red", "blue"]), when))
    return triples


def _write(path: Path, triples) -> Path:
    """``triples`` as a file of the line format: the timestamp is each triple's fourth term."""
    path.write_text("".join(f'<{s}> <{p}> {_object(o)} "{format_instant(at)}"^^<{XSD}dateTime> .\n'
                            for s, p, o, at in triples), encoding="utf-8")
    return path


def _object(value: str) -> str:
    return f"<{value}>" if value.startswith("http") else f'"{value}"'


COUNTS = f"""REGISTER QUERY counts AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 1m STEP 30s]
WHERE {{ ?gate ex:registers ?car . OPTIONAL {{ ?car ex:colour ?colour }} FILTER (!BOUND(?colour) || ?colour != "red") }}
GROUP BY ?gate
"""
LATEST = f"""REGISTER QUERY latest AS
PREFIX ex: <{EX}>
SELECT ?gate ?car
FROM STREAM <{STREAM}> [TRIPLES 7]
WHERE {{ ?gate ex:registers ?car }}
"""


@pytest.mark.spark
def test_a_stream_landed_every_five_seconds_reads_a_file_per_closed_minute_and_answers_as_pyoxigraph(spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    chosen = random.Random(2010)
    landed: list[tuple[str, str, object, int]] = []
    for number in range(36):  # three minutes, every 5 s
        triples = _landing(number, START + number * 5_000_000, chosen)
        report = ingest_stream(None, warehouse, STREAM, [_write(tmp_path / f"in{number}.nq", triples)],
                               in_process=True)
        assert report.rejected == 0
        landed += triples
    late = [(f"{EX}gate1", f"{EX}registers", f"{EX}latecar", START + 20_000_000)]  # in the first minute
    ingest_stream(None, warehouse, STREAM, [_write(tmp_path / "late.nq", late)], in_process=True)
    landed += late

    path = warehouse.stream(STREAM)
    files = delta.live_files(delta.open_table(path), path)
    per_minute = Counter((f.min_ts - START) // MINUTE for f in files)
    assert per_minute == {0: 1, 1: 1, 2: 12}  # the late file merged into its minute's again; the last still filling
    rows = Counter((r["s"]["value"], r["p"]["value"], r["o"]["value"], r["ts"]) for r in rows_of(path))
    assert rows == Counter(landed)
    # the staleness checks see the ingests' commits, and not the compactions'
    compactions = [c for c in delta.open_table(path).history() if c.get(OPERATION) == "compact"]
    assert len(compactions) >= 3 and all(c["operationParameters"]["mode"] == "Append" for c in compactions)
    assert len(stream_commits(path)) == 37

    stream = [(URIRef(s), URIRef(p), URIRef(o) if o.startswith("http") else Literal(o), at) for s, p, o, at in landed]
    engine = Engine(warehouse, spark)
    for text, name in ((COUNTS, "counts"), (LATEST, "latest")):
        plan = compile_query(text)
        for seconds in (30, 60, 90, 120, 150, 180):
            at = START + seconds * 1_000_000
            ours = engine.evaluate(plan, at, name, write=False).result
            truth = reference.evaluate(reference.Case(name, text, {URIRef(STREAM): stream}, {}, at))
            assert truth.rows, (name, seconds)
            assert Counter(tuple(map(str, row)) for row in ours.rows) == Counter(
                tuple(map(str, row)) for row in truth.rows), (name, seconds)
