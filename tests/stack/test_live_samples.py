"""The embedded stack's live sample streams: files of sample events timestamped now, landed again and again in
the landing folders the ingestion DAGs read, and the DAGs folder given ingestion DAGs when it has none."""

from __future__ import annotations

import re
import time

from csparql.deploy.settings import Settings
from csparql.ingest.landing import land_waiting_files
from csparql.samples import STREAMS
from csparql.stack.embedded import LiveSamples, write_stream_dags
from csparql.storage.watermarks import read_watermarks
from csparql.core.windows import parse_instant

TOLLGATES = STREAMS["citytollgates"]
MARKET = STREAMS["market"]


def test_live_samples_land_events_timestamped_now_again_and_again(spark, tmp_path):
    settings = Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                          "CSPARQL_REGISTRY": str(tmp_path / "dags" / "queries")})
    live = LiveSamples(settings, {TOLLGATES, MARKET}, every=5.0)
    marks, previous = [], None
    for _ in range(3):
        assert live.due()
        began = time.time_ns() // 1000
        written = live.land()
        assert not live.due()
        assert sorted(p.parent for p in written) == sorted(settings.landing_folder(i) for i in (TOLLGATES, MARKET))
        instants = [parse_instant(t) for t in re.findall(r'"([^"]+)"\^\^<[^>]+dateTime>', written[0].read_text())]
        assert instants and max(instants) <= live.last and (previous is None or min(instants) > previous)
        previous = live.last
        for iri in (TOLLGATES, MARKET):
            summary = land_waiting_files(lambda: spark, settings.warehouse, iri, settings.landing_folder(iri))
            assert summary.files == 1 and not list((settings.landing_folder(iri) / "rejected").glob("*.tnq"))
        mark = read_watermarks(settings.warehouse)[TOLLGATES]
        # timestamped now: the sample rate is an event every 5 s, moved back by less than 5 s
        assert began - 10_000_000 < mark <= time.time_ns() // 1000
        marks.append(mark)
        time.sleep(max(0.0, live.last / 1_000_000 + 5.0 - time.time()))
    assert marks == sorted(set(marks))  # each file's events come after the previous one's
    landed = sorted(p.name for p in (settings.landing_folder(TOLLGATES) / "done").iterdir())
    assert len(landed) == 3 and all(name.startswith("live-") for name in landed)


def test_a_dags_folder_without_the_ingestion_dags_gets_them(tmp_path):
    dags = tmp_path / "own-dags"
    written = write_stream_dags(dags)
    assert written == dags / "csparql_streams.py" and "csparql_dags(queries=False)" in written.read_text()
    assert write_stream_dags(dags) is None  # once there, left alone


def test_the_sample_history_declared_complete_leaves_a_query_up_to_date_with_it_no_lag(tmp_path):
    # The stack declares the sample history complete as far as the windows its backfills evaluate need, no
    # further: a query that evaluated them is not shown a day late with hundreds of windows behind.
    from csparql.deploy.monitoring import WindowRun, stream_lags
    from csparql.deploy.plan import deployment_of_text
    from csparql.samples import DEFAULT_START, SampleFiles
    from csparql.stack.embedded import BackfillPlan, backfill_windows, history_watermarks
    from support import SPEC_QUERIES

    settings = Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                          "CSPARQL_REGISTRY": str(tmp_path / "dags" / "queries")})
    start = parse_instant(DEFAULT_START)
    files = SampleFiles(streams={TOLLGATES: tmp_path / "t.tnq", MARKET: tmp_path / "m.tnq"}, start=start,
                        end=start + 3 * 3_600_000_000)
    plans = [BackfillPlan(d, backfill_windows(d, files, 3)) for d in (
        deployment_of_text((SPEC_QUERIES / f"{example}.rq").read_text(), f"ex{n}", settings)
        for n, example in enumerate(("04-cars-per-district", "11-broker-daily-total")))]
    marks = history_watermarks(plans, files)
    for plan in plans:  # every backfilled window counts as complete
        last = plan.windows[-1]
        assert all(marks[s.iri] >= last.end + s.lateness for s in plan.deployment.inputs)
    per_district = plans[0]
    evaluated = [WindowRun(w.start, w.end, "complete", w.end, {}, {}, 1, 1, None, None, f"r{i}")
                 for i, w in enumerate(per_district.windows)]
    lag, = stream_lags(per_district.deployment, marks, evaluated)
    assert (lag.lag, lag.windows_behind) == (0, 0)
