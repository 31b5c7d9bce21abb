"""What the ingest works out over Arrow columns is what its one-value-at-a-time definition gives: the instants of
many timestamps (``bounded_timestamps_micros`` against ``bounded_timestamp_micros``: the same instants, the same
reasons) and the event times of a staged file (``staged_event_times_metadata`` against
``event_times_metadata``, whose coarsening ``csparql.core.lateness`` defines)."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from csparql.ingest.event_times import event_times_metadata, staged_event_times_metadata
from csparql.ingest.parsers.lines import FutureLimit, LineError, bounded_timestamp_micros, bounded_timestamps_micros

XSD = "http://www.w3.org/2001/XMLSchema#"
EDGES = [
    ("2010-03-22T11:00:00.002416Z", "dateTime"), ("2010-03-22T11:00:00Z", "dateTime"),
    ("2010-02-30T11:00:00Z", "dateTime"), ("2011-02-29T00:00:00Z", "dateTime"), ("2012-02-29T00:00:00Z", "dateTime"),
    ("2010-03-22T23:59:60Z", "dateTime"), ("2010-03-22T24:00:00Z", "dateTime"), ("2010-13-22T11:00:00Z", "dateTime"),
    ("0000-01-01T00:00:00Z", "dateTime"), ("0001-01-01T00:00:00Z", "dateTime"), ("0999-12-31T23:59:59Z", "dateTime"),
    ("9999-12-31T23:59:59.999999Z", "dateTime"), ("10000-01-01T00:00:00Z", "dateTime"),
    ("2010-03-22T10:00:00+01:00", "dateTime"), ("2010-03-22T10:00:00", "dateTime"),
    ("2010-03-22T10:00:00.1234567Z", "dateTime"), ("2010-03-22T10:00:00.Z", "dateTime"),
    ("2010-03-22T10:00:00Z", "dateTimeStamp"), ("1269252000000", "long"), ("1269252000000", "integer"),
    ("-1269252000000", "long"), ("12692520000000000", "long"), ("12.5", "decimal"), ("abc", "long"),
    ("2010-03-22T10:00:00Z", "string"), ("1269252000000", "string"), ("2010-03-22", "date"), ("", "dateTime"),
    ("2010-03-22T10:00:00Z", None), ("2030-01-01T00:00:00Z", "dateTime"), ("2019-12-31T23:59:59.999999Z", "dateTime"),
    ("2020-01-01T00:00:00.000001Z", "dateTime"), ("1577836800000", "long"), ("1577836800001", "long"),
]
FUTURE = FutureLimit(1_577_836_800_000_000, "2020-01-01T00:00:00Z (a test's bound)")


def random_timestamps(seed: int, count: int) -> list[tuple[str, str | None]]:
    chosen = random.Random(seed)
    made = []
    for _ in range(count):
        year, month, day = chosen.randrange(0, 10001), chosen.randrange(0, 14), chosen.randrange(0, 33)
        hour, minute, second = chosen.randrange(0, 26), chosen.randrange(0, 62), chosen.randrange(0, 62)
        fraction = chosen.choice(["", "." + str(chosen.randrange(10 ** 7)).zfill(chosen.randrange(1, 8))])
        zone = chosen.choice(["Z", "Z", "", "+02:00", "-11:30"])
        made.append((f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}{zone}",
                     chosen.choice(["dateTime", "dateTime", "dateTimeStamp", "string"])))
        made.append((str(chosen.randrange(-10 ** 15, 10 ** 15)), chosen.choice(["long", "integer", "int"])))
    return made


def one_at_a_time(lexical: str, datatype: str | None, future: FutureLimit | None) -> tuple[int | None, str | None]:
    try:
        return bounded_timestamp_micros(lexical, datatype, future), None
    except LineError as error:
        return None, str(error)


@pytest.mark.parametrize("future", [None, FUTURE], ids=["unbounded", "bounded"])
def test_many_timestamps_read_at_once_give_each_ones_instant_or_reason(future):
    timestamps = EDGES + random_timestamps(seed=11, count=3000)
    datatypes = [None if kind is None else XSD + kind for _, kind in timestamps]
    micros, reasons = bounded_timestamps_micros(pa.array([lexical for lexical, _ in timestamps]),
                                                pa.array(datatypes, pa.string()), future)
    together = list(zip(micros.to_pylist(), [reasons.get(i) for i in range(len(timestamps))]))
    alone = [one_at_a_time(lexical, datatype, future) for (lexical, _), datatype in zip(timestamps, datatypes)]
    assert together == alone
    assert sum(1 for m, _ in alone if m is not None) > 300 and sum(1 for _, r in alone if r) > 300  # both kinds


@pytest.mark.parametrize("count, spread", [(0, 10), (100, 10 ** 6), (5_000, 10 ** 9), (300_000, 10 ** 11),
                                           (300_000, 10 ** 13), (3_000, 10 ** 15), (50_000, 10 ** 17)])
def test_the_event_times_of_a_staged_file_are_those_of_its_triples_coarsened(count, spread):
    chosen = random.Random(count + spread)
    instants = [chosen.randrange(-spread, spread) for _ in range(count)]
    for until in (spread, 0, -spread - 1):
        expected = event_times_metadata(Counter(instants).items(), until)
        assert staged_event_times_metadata(pa.array(instants, pa.int64()), until) == expected
