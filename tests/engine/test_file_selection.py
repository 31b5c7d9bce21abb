"""Which files a window reads: pure functions over what the Delta log says about each file."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from csparql.storage.pruning import select_latest_files, select_window_files
from csparql.storage.delta import FileInfo
from csparql.storage.instants import bucket_of
from csparql.core.windows import WindowBounds, parse_instant

HOUR = 3_600_000_000
MS = 1_000
T0 = parse_instant("2010-03-22T00:00:00Z")


def file(name: str, start: int, end: int, records: int = 10) -> FileInfo:
    """A file holding triples with τ in [start, end], its statistics truncated to the millisecond."""
    return FileInfo(f"/t/{name}", 100, records, start - start % MS, end - end % MS, {"bucket": bucket_of(start)})


def test_a_window_reads_only_the_files_that_overlap_it():
    files = [file(f"h{h}", T0 + h * HOUR, T0 + (h + 1) * HOUR - 1) for h in range(24)]
    window = WindowBounds(T0 + 10 * HOUR, T0 + 11 * HOUR)
    chosen = select_window_files(files, window)
    # (10:00, 11:00] holds 11:00:00 itself, which lies in the 11:00 file.
    assert [f.uri for f in chosen] == ["/t/h10", "/t/h11"]
    later = WindowBounds(T0 + 10 * HOUR + 1, T0 + 11 * HOUR - 1)
    assert [f.uri for f in select_window_files(files, later)] == ["/t/h10"]


def test_the_open_start_of_a_window_excludes_a_file_ending_exactly_there():
    before = file("before", T0, T0 + HOUR)  # its last triple sits on the window's open start
    inside = file("inside", T0 + HOUR + 1, T0 + 2 * HOUR)
    chosen = select_window_files([before, inside], WindowBounds(T0 + HOUR, T0 + 2 * HOUR))
    assert [f.uri for f in chosen] == ["/t/inside"]


def test_millisecond_truncated_statistics_never_lose_a_file():
    # The true maximum is 999 µs after the start; the log records it truncated to the start's millisecond.
    late = FileInfo("/t/late", 1, 1, T0 + 5 * MS, T0 + 5 * MS, {"bucket": bucket_of(T0)})
    chosen = select_window_files([late], WindowBounds(T0 + 5 * MS + 500, T0 + HOUR))
    assert [f.uri for f in chosen] == ["/t/late"]


@settings(max_examples=200, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 48 * HOUR), st.integers(0, 2 * HOUR), st.integers(1, 50)), min_size=1, max_size=30),
    end=st.integers(0, 50 * HOUR),
    count=st.integers(1, 200),
)
def test_a_physical_window_keeps_every_file_that_can_hold_one_of_the_n_latest(spans, end, count):
    """Brute force: spread each file's records evenly over its span; the n latest records with τ ≤ end must
    all come from chosen files."""
    files, records = [], []
    for i, (start, length, n) in enumerate(spans):
        times = [T0 + start + (length * k) // max(1, n - 1) for k in range(n)]
        files.append(FileInfo(f"/t/{i}", 1, n, min(times) - min(times) % MS, max(times) - max(times) % MS, {}))
        records.extend((t, i) for t in times)
    eligible = sorted((r for r in records if r[0] <= T0 + end), reverse=True)[:count]
    needed = {f"/t/{i}" for _, i in eligible}
    chosen = {f.uri for f in select_latest_files(files, T0 + end, count)}
    assert needed <= chosen
