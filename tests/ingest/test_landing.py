"""Landing folders: every waiting file lands once, even when the run landing it stops between its commit and
moving the file to done/ (the process killed there is simulated by an exception no code path catches)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from csparql.ingest import ingest as ingest_module
from csparql.ingest import landing
from csparql.ingest.landing import INTENT, land_waiting_files
from csparql.storage import delta
from csparql.storage.instants import MAX_MICROS
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import watermark

STREAM = "http://streams.org/landing-test"
XSD = "http://www.w3.org/2001/XMLSchema#"
START_MS = 1269252000000  # 2010-03-22T10:00:00Z


class Killed(BaseException):
    """The process dying at this point: nothing catches it, no cleanup after it runs."""


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "warehouse")


@pytest.fixture
def folder(tmp_path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


def drop(folder: Path, name: str, first: int, count: int) -> Path:
    """A timestamped N-Quads file of ``count`` triples, one a second from START_MS + ``first`` s."""
    path = folder / name
    path.write_text("".join(f'<http://e/car{i}> <http://e/passes> <http://e/gate{i % 3}> '
                            f'"{START_MS + i * 1000}"^^<{XSD}integer> .\n' for i in range(first, first + count)),
                    encoding="utf-8")
    return path


def stored(warehouse: Warehouse) -> tuple[int, int]:
    """The stream table's (version, triples)."""
    path = warehouse.stream(STREAM)
    table = delta.open_table(path)
    return table.version(), sum(f.records for f in delta.live_files(table, path))


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_file()} if folder.is_dir() else set()


def test_waiting_files_land_once_each_and_move_to_done(spark, warehouse, folder):
    drop(folder, "a.nq", 0, 5)
    drop(folder, "b.nq", 5, 4)
    (folder / "plain.ttl").write_text("<http://e/s> <http://e/p> <http://e/o> .\n", encoding="utf-8")
    drop(folder, ".partial.nq", 100, 3)  # still being written: left alone

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert summary.to_dict() == {"landed": 9, "files": 3, "rejected": 1, "recovered": [], "already_landed": [],
                                 "landed_files": ["a.nq", "b.nq"], "taken": []}
    assert stored(warehouse)[1] == 9
    assert files_in(folder / "done") == {"a.nq", "b.nq"}
    assert files_in(folder / "rejected") == {"plain.ttl", "plain.ttl.reason"}  # no line of a or b refused
    assert "pass --timestamp" in (folder / "rejected" / "plain.ttl.reason").read_text(encoding="utf-8")
    assert files_in(folder) == {".partial.nq"}  # no intent record left behind
    assert watermark(warehouse, STREAM) == (START_MS + 8 * 1000) * 1000


def land_a_then_kill_while_landing_b(spark, warehouse, folder, monkeypatch, module, function: str) -> None:
    """Lands a.nq (5 triples), drops b.nq (4 triples) and runs again, the process dying when b's ingest calls
    ``module.function``."""
    drop(folder, "a.nq", 0, 5)
    land_waiting_files(lambda: spark, warehouse, STREAM, folder)
    drop(folder, "b.nq", 5, 4)

    def killed(*args, **kwargs):
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(module, function, killed)
        with pytest.raises(Killed):
            land_waiting_files(lambda: spark, warehouse, STREAM, folder)


def test_a_file_committed_before_its_run_stopped_is_moved_not_landed_again(spark, warehouse, folder, monkeypatch):
    # b's commit happens, then the process dies before advancing the watermark and moving b
    land_a_then_kill_while_landing_b(spark, warehouse, folder, monkeypatch, ingest_module, "advance_watermark")
    after_the_kill = stored(warehouse)
    assert after_the_kill[1] == 9 and (folder / "b.nq").exists() and (folder / INTENT).exists()
    assert watermark(warehouse, STREAM) == (START_MS + 4 * 1000) * 1000

    def no_spark():
        raise AssertionError("nothing is waiting: Spark must not start")

    summary = land_waiting_files(no_spark, warehouse, STREAM, folder)

    assert summary.recovered == ["b.nq"] and summary.landed == 0
    assert stored(warehouse) == after_the_kill  # no second commit: b's triples are stored once
    assert files_in(folder / "done") == {"a.nq", "b.nq"} and not (folder / INTENT).exists()
    assert watermark(warehouse, STREAM) == (START_MS + 8 * 1000) * 1000


def test_a_file_not_committed_when_its_run_stopped_lands_on_the_next_run(spark, warehouse, folder, monkeypatch):
    land_a_then_kill_while_landing_b(spark, warehouse, folder, monkeypatch, ingest_module.delta, "commit_files")
    assert stored(warehouse)[1] == 5 and (folder / INTENT).exists()

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert (summary.recovered, summary.landed) == ([], 4)
    assert stored(warehouse)[1] == 9
    assert files_in(folder / "done") == {"a.nq", "b.nq"} and not (folder / INTENT).exists()


def test_a_file_dropped_again_under_a_landed_name_lands_again(spark, warehouse, folder):
    """Producers reuse names: only an interrupted run's intent record makes a waiting file count as landed."""
    drop(folder, "batch.nq", 0, 5)
    land_waiting_files(lambda: spark, warehouse, STREAM, folder)
    drop(folder, "batch.nq", 5, 4)

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert (summary.recovered, summary.landed) == ([], 4)
    assert stored(warehouse)[1] == 9


def test_an_unreadable_intent_record_is_dropped_and_the_file_lands(spark, warehouse, folder):
    drop(folder, "a.nq", 0, 5)
    (folder / INTENT).write_text("{not json", encoding="utf-8")

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert (summary.recovered, summary.landed) == ([], 5)
    assert not (folder / INTENT).exists()
    assert landing.waiting_files(folder) == []


# --- timestamps in the future ------------------------------------------------------------------------------

FAR_FUTURE = f'<http://e/car99> <http://e/passes> <http://e/gate0> "9999-12-31T00:00:00Z"^^<{XSD}dateTime> .\n'
HOUR = 3_600_000_000


def test_a_line_dated_far_in_the_future_is_refused_and_the_rest_of_its_file_lands(spark, warehouse, folder):
    path = drop(folder, "a.nq", 0, 5)
    with open(path, "a", encoding="utf-8") as file:
        file.write(FAR_FUTURE)

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert (summary.landed, summary.rejected) == (5, 0)  # the file landed; one of its lines was refused
    assert files_in(folder / "done") == {"a.nq"} and files_in(folder / "rejected") == {"a.nq.rejects.tsv"}
    [reject] = (folder / "rejected" / "a.nq.rejects.tsv").read_text(encoding="utf-8").splitlines()
    name, line, reason, _ = reject.split("\t")
    assert (name, line) == (str(folder / "a.nq"), "6")
    assert reason.startswith("the timestamp '9999-12-31T00:00:00Z' is too far in the future: later than ")
    assert watermark(warehouse, STREAM) == (START_MS + 4 * 1000) * 1000


def test_recovering_an_interrupted_landing_never_moves_the_watermark_past_the_skew(spark, warehouse, folder,
                                                                                     monkeypatch):
    # A run without the bound (as an older csparql) committed a file with a far-future line, then died.
    path = drop(folder, "a.nq", 0, 5)
    with open(path, "a", encoding="utf-8") as file:
        file.write(FAR_FUTURE)

    def killed(*args, **kwargs):
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(ingest_module, "advance_watermark", killed)
        patch.setattr(ingest_module, "future_bound", lambda skew, now=None: MAX_MICROS)
        with pytest.raises(Killed):
            land_waiting_files(lambda: spark, warehouse, STREAM, folder)
    assert stored(warehouse)[1] == 6 and watermark(warehouse, STREAM) is None

    summary = land_waiting_files(lambda: pytest.fail("nothing is waiting"), warehouse, STREAM, folder)

    assert summary.recovered == ["a.nq"]
    assert time.time_ns() // 1000 < watermark(warehouse, STREAM) <= time.time_ns() // 1000 + HOUR


def test_a_file_whose_content_landed_under_another_name_moves_to_done_without_landing_again(
        spark, warehouse, folder):
    """The same content into the same stream lands once, from a landing folder as from ``csparql ingest``."""
    first = drop(folder, "a.nq", 0, 5)
    content = first.read_bytes()
    land_waiting_files(lambda: spark, warehouse, STREAM, folder)
    (folder / "a-again.nq").write_bytes(content)

    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder)

    assert (summary.landed, summary.already_landed, summary.recovered) == (0, ["a-again.nq"], [])
    assert stored(warehouse) == (1, 5)
    assert files_in(folder / "done") == {"a.nq", "a-again.nq"} and not (folder / INTENT).exists()


def test_a_stream_s_own_timestamp_predicates_timestamp_the_graphs_of_its_landing_folder(spark, warehouse, folder):
    from csparql.deploy.settings import Settings

    sosa = "http://www.w3.org/ns/sosa/resultTime"
    (folder / "events.trig").write_text(
        f"<http://ex.org/e1> {{ <http://ex.org/gate1> <http://ex.org/registers> <http://ex.org/car1> . }}\n"
        f'<http://ex.org/e1> <{sosa}> "2010-03-22T10:00:05Z"^^<{XSD}dateTime> .\n', encoding="utf-8")
    settings = Settings.from_environment({"CSPARQL_WAREHOUSE": str(warehouse.root),
                                          "CSPARQL_TIMESTAMP_PREDICATES": f'{{"{STREAM}": ["{sosa}"]}}'})
    assert settings.timestamp_predicates_of(STREAM) == (sosa,)
    assert settings.timestamp_predicates_of("http://streams.org/other") == (
        "http://www.w3.org/ns/prov#generatedAtTime",)
    summary = land_waiting_files(lambda: spark, warehouse, STREAM, folder,
                                 timestamp_predicates=settings.timestamp_predicates_of(STREAM))
    assert (summary.landed, summary.landed_files) == (1, ["events.trig"])
    assert watermark(warehouse, STREAM) == (START_MS + 5_000) * 1000
    for text in ('{"http://ex.org/s": "http://ex.org/p"}', '{"http://ex.org/s": ["not an iri"]}', "[]"):
        with pytest.raises(ValueError, match="CSPARQL_TIMESTAMP_PREDICATES=.*non-empty lists of predicate IRIs"):
            Settings.from_environment({"CSPARQL_TIMESTAMP_PREDICATES": text})


def test_two_ingesters_racing_on_one_file_land_it_once_and_the_second_skips_it_cleanly(spark, warehouse, folder,
                                                                                        caplog):
    import threading

    drop(folder, "a.nq", 0, 20)
    both_listed = threading.Barrier(2, timeout=60)

    def start_spark():  # called once a run has listed the waiting files: both have seen a.nq when they go on
        both_listed.wait()
        return spark

    outcomes, failures = [], []

    def ingester():
        try:
            outcomes.append(land_waiting_files(start_spark, warehouse, STREAM, folder))
        except BaseException as error:  # noqa: BLE001 - the failure is what the test looks at
            failures.append(error)

    with caplog.at_level("INFO", logger="csparql.ingest.landing"):
        threads = [threading.Thread(target=ingester) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    assert failures == [] and len(outcomes) == 2
    winner, loser = sorted(outcomes, key=lambda summary: -summary.landed)
    assert (winner.landed, winner.landed_files, winner.taken) == (20, ["a.nq"], [])
    assert (loser.landed, loser.landed_files, loser.taken) == (0, [], ["a.nq"])
    assert stored(warehouse)[1] == 20
    assert files_in(folder / "done") == {"a.nq"} and files_in(folder) == set()
    skipped = [r.getMessage() for r in caplog.records if "another ingester" in r.getMessage()]
    assert skipped == ["a.nq was landed by another ingester meanwhile (see done/ and rejected/); skipped"]
