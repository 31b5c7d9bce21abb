"""Tests for csparql.core.windows: durations, instants, window bounds and evaluation times.

Expected values are written out by hand or computed independently (brute-force enumeration over small
grids, or datetime arithmetic), never by calling the function under test again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

try:
    import csparql  # noqa: F401
except ImportError:  # the package lives in the Airflow plugins folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from csparql.core.windows import (  # noqa: E402
    EARLIEST_INSTANT,
    LATEST_INSTANT,
    MAX_COUNT,
    MAX_DURATION,
    MICROS_PER,
    PHYSICAL_WINDOW_DEFAULT_PERIOD,
    LogicalWindow,
    PhysicalWindow,
    Window,
    WindowBounds,
    canonical_unit,
    default_period,
    evaluation_period,
    evaluation_times,
    format_duration,
    format_instant,
    from_micros,
    latest_window_end,
    parse_duration,
    parse_evaluation_instant,
    parse_instant,
    to_micros,
    unit_micros,
    window_at,
    window_bounds,
)


# The schedule of one window written out in full, from the module's arithmetic (evaluation_times, window_at):
# what these tests state the window arithmetic gives, not used by the product itself.


def previous_evaluation(period: int, t: int) -> int:
    """The latest multiple of ``period`` (> 0) that is ``<= t``."""
    return t - t % period


def next_evaluation(period: int, t: int) -> int:
    """The earliest multiple of ``period`` (> 0) that is strictly ``> t``."""
    return previous_evaluation(period, t) + period


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a query: at instant ``at``, over the window with ``bounds`` (``bounds.end <= at``)."""

    at: int
    bounds: WindowBounds


def evaluations(window: Window, computed_every: int | None, start: int, end: int) -> Iterator[Evaluation]:
    """One ``Evaluation`` per evaluation instant in ``[start, end]`` (the multiples of
    ``evaluation_period(window, computed_every)``), each with the latest window closed at that instant."""
    times = evaluation_times(evaluation_period(window, computed_every), start, end)
    return (Evaluation(at, window_at(window, at)) for at in times)


def window_ends_between(window: Window, start: int, end: int) -> Iterator[int]:
    """Each end of a window of the logical ``window`` in ``[start, end]``; a physical window has no grid of
    ends (``TypeError``)."""
    if not isinstance(window, LogicalWindow):
        raise TypeError(f"window_ends_between needs a logical (RANGE) window, got {window!r}")
    return evaluation_times(window.step, start, end)

MS = 1_000
SEC = 1_000_000
MIN = 60 * SEC
HOUR = 60 * MIN
DAY = 24 * HOUR

# 2010-03-22T00:00:00Z = 14690 days after the epoch (40 years incl. 10 leap days = 14610, + 59 + 21 days).
DAY_2010_03_22 = 14_690 * DAY


def at(hh: int, mm: int, ss: int = 0, us: int = 0) -> int:
    """An instant on 2010-03-22 (UTC), computed without the module under test."""
    return DAY_2010_03_22 + hh * HOUR + mm * MIN + ss * SEC + us


FEW = settings(max_examples=150, deadline=None, database=None)

# Small grids for brute-force checks.
small_durations = st.integers(min_value=1, max_value=12)
small_instants = st.integers(min_value=-60, max_value=60)
# Large instants spanning well before and after 1970.
instants = st.integers(min_value=-(10**17), max_value=10**17)
steps = st.integers(min_value=1, max_value=10 * DAY)


@st.composite
def logical_windows(draw, step_strategy=steps, max_factor: int = 20):
    step = draw(step_strategy)
    extra = draw(st.integers(min_value=0, max_value=step * max_factor))
    return LogicalWindow(range=step + extra, step=step)


@st.composite
def small_logical_windows(draw):
    step = draw(small_durations)
    rng = draw(st.integers(min_value=step, max_value=30))
    return LogicalWindow(range=rng, step=step)


# -------------------------------------------------------------------------------------------------------
# Units
# -------------------------------------------------------------------------------------------------------


def test_micros_per_table():
    assert MICROS_PER == {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


UNIT_SPELLINGS = {
    "ms": ["ms", "msec", "msecs", "millis", "millisecond", "milliseconds", "MS", "MSEC", "Millis", "MilliSeconds"],
    "s": ["s", "sec", "secs", "second", "seconds", "S", "SEC", "Secs", "SECONDS"],
    "m": ["m", "min", "mins", "minute", "minutes", "M", "MIN", "Mins", "MINUTES"],
    "h": ["h", "hour", "hours", "hr", "hrs", "H", "HOUR", "HR", "Hours"],
    "d": ["d", "day", "days", "D", "DAY", "Days"],
    "us": ["us", "US"],
}
UNIT_SIZES = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000, "us": 1}


@pytest.mark.parametrize(
    ("spelling", "canonical"), [(s, c) for c, spellings in UNIT_SPELLINGS.items() for s in spellings]
)
def test_unit_spellings(spelling, canonical):
    assert canonical_unit(spelling) == canonical
    assert unit_micros(spelling) == UNIT_SIZES[canonical]


@pytest.mark.parametrize("bad", ["parsecs", "", "mo", "week", "minutess", "y"])
def test_unknown_unit_is_rejected_with_the_accepted_list(bad):
    with pytest.raises(ValueError) as info:
        unit_micros(bad)
    message = str(info.value)
    assert repr(bad) in message
    for accepted in ("ms", "sec", "minutes", "hours", "days"):
        assert accepted in message
    with pytest.raises(ValueError):
        canonical_unit(bad)


# -------------------------------------------------------------------------------------------------------
# Durations
# -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5m", 5 * MIN),
        ("5 m", 5 * MIN),
        ("10 MIN", 10 * MIN),
        ("24 hours", 24 * HOUR),
        ("1.5h", 90 * MIN),
        ("250ms", 250 * MS),
        ("0.5ms", 500),
        (".5s", 500 * MS),
        ("1.000001s", SEC + 1),
        ("  7 days ", 7 * DAY),
        ("1500us", 1_500),
        ("90s", 90 * SEC),
        ("2 hrs", 2 * HOUR),
        ("3 Seconds", 3 * SEC),
        ("0s", 0),
    ],
)
def test_parse_duration_examples(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("5", "invalid duration"),
        ("m", "amount is missing"),
        ("5 parsecs", "unknown time unit 'parsecs'"),
        ("5m5s", "invalid duration"),
        ("1.5.2m", "invalid duration"),
        ("--5m", "invalid duration"),
        ("1.0000001s", "whole number of microseconds"),
        ("0.5us", "whole number of microseconds"),
        ("five minutes", "invalid duration"),
    ],
)
def test_parse_duration_errors(text, fragment):
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert fragment in str(info.value)


def test_parse_duration_is_exact_for_huge_amounts():
    # Beyond float and default-Decimal precision: must still be exact.
    assert parse_duration("123456789012345678901234567890m") == 123456789012345678901234567890 * MIN
    assert parse_duration("1.500000000000000000000000000000000000h") == 90 * MIN
    assert parse_duration("0.000001s") == 1


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (300_000_000, "5m"),
        (90_000_000, "90s"),
        (86_400_000_000, "1d"),
        (36 * HOUR, "36h"),
        (48 * HOUR, "2d"),
        (250_000, "250ms"),
        (1_500, "1500us"),
        (1, "1us"),
        (1_000, "1ms"),
        (SEC + 1, "1000001us"),
        (0, "0s"),
        (-5 * MIN, "-5m"),
    ],
)
def test_format_duration_examples(micros, text):
    assert format_duration(micros) == text


@FEW
@given(st.integers(min_value=-(10**18), max_value=10**18))
def test_format_parse_duration_round_trip(micros):
    text = format_duration(micros)
    assert parse_duration(text) == micros
    # The unit is the largest one dividing exactly.
    amount_text = text.lstrip("-").rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(text.rstrip("abcdefghijklmnopqrstuvwxyz")):]
    sizes = [("d", DAY), ("h", HOUR), ("m", MIN), ("s", SEC), ("ms", MS), ("us", 1)]
    if micros != 0:
        expected_unit = next(u for u, size in sizes if micros % size == 0)
        assert unit == expected_unit
        assert int(amount_text) * UNIT_SIZES[unit] == abs(micros)


@FEW
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from([s for spellings in UNIT_SPELLINGS.values() for s in spellings]),
    st.sampled_from(["", " ", "  "]),
)
def test_parse_duration_integer_amounts(amount, spelling, space):
    canonical = next(c for c, spellings in UNIT_SPELLINGS.items() if spelling in spellings)
    assert parse_duration(f"{amount}{space}{spelling}") == amount * UNIT_SIZES[canonical]


@FEW
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=6))
def test_parse_duration_decimal_seconds(micros, digits):
    # A decimal number of seconds with `digits` fractional digits is exact iff it is whole microseconds.
    whole, frac = divmod(micros, SEC)
    frac_text = f"{frac:06d}"
    text = f"{whole}.{frac_text[:digits]}s"
    truncated = whole * SEC + int(frac_text[:digits].ljust(6, "0"))
    assert parse_duration(text) == truncated


# -------------------------------------------------------------------------------------------------------
# Windows
# -------------------------------------------------------------------------------------------------------


def test_logical_window_validation():
    assert LogicalWindow(range=30 * MIN, step=5 * MIN).step == 5 * MIN
    with pytest.raises(ValueError, match="longer than its RANGE"):
        LogicalWindow(range=5 * MIN, step=10 * MIN)
    with pytest.raises(ValueError, match="longer than its RANGE"):
        LogicalWindow(range=5 * MIN, step=5 * MIN + 1)
    assert LogicalWindow(range=5 * MIN, step=5 * MIN).tumbling
    assert LogicalWindow(range=1, step=1).range == 1
    with pytest.raises(ValueError, match="RANGE must be positive"):
        LogicalWindow(range=0, step=0)
    with pytest.raises(ValueError, match="RANGE must be positive"):
        LogicalWindow(range=-MIN, step=MIN)
    with pytest.raises(ValueError, match="STEP must be positive"):
        LogicalWindow(range=MIN, step=0)
    with pytest.raises(ValueError, match="STEP must be positive"):
        LogicalWindow(range=MIN, step=-SEC)


def test_logical_window_text_and_tumbling():
    sliding = LogicalWindow(range=30 * MIN, step=5 * MIN)
    tumbling = LogicalWindow(range=5 * MIN, step=5 * MIN)
    assert str(sliding) == "RANGE 30m STEP 5m"
    assert not sliding.tumbling
    assert str(tumbling) == "RANGE 5m TUMBLING"
    assert tumbling.tumbling
    assert str(LogicalWindow(range=DAY, step=90 * SEC)) == "RANGE 1d STEP 90s"


def test_windows_are_frozen():
    window = LogicalWindow(range=MIN, step=MIN)
    with pytest.raises(AttributeError):
        window.range = 2 * MIN  # type: ignore[misc]
    with pytest.raises(AttributeError):
        PhysicalWindow(3).count = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        WindowBounds(0, 1).end = 2  # type: ignore[misc]


def test_physical_window():
    window = PhysicalWindow(1000)
    assert str(window) == "TRIPLES 1000"
    assert PhysicalWindow(1).count == 1
    with pytest.raises(ValueError, match="at least 1"):
        PhysicalWindow(0)
    with pytest.raises(ValueError, match="at least 1"):
        PhysicalWindow(-3)
    t = at(10, 10, 30)
    assert latest_window_end(window, t) == t
    assert window_at(window, t) == WindowBounds(None, t)
    assert window_bounds(window, t + 7) == WindowBounds(None, t + 7)
    assert default_period(window) == PHYSICAL_WINDOW_DEFAULT_PERIOD == 60 * SEC
    assert str(window_at(window, at(10, 10))) == "(-inf, 2010-03-22T10:10:00Z]"


def test_physical_window_bounds_contain_everything_up_to_the_end():
    bounds = WindowBounds(None, at(10, 10))
    assert bounds.contains(at(10, 10))
    assert bounds.contains(at(10, 9, 59, 999_999))
    assert bounds.contains(-(10**15))
    assert not bounds.contains(at(10, 10) + 1)


def test_window_bounds_text_and_contains():
    bounds = WindowBounds(at(10, 0), at(10, 10))
    assert str(bounds) == "(2010-03-22T10:00:00Z, 2010-03-22T10:10:00Z]"
    assert not bounds.contains(at(10, 0))
    assert bounds.contains(at(10, 0) + 1)
    assert bounds.contains(at(10, 10))
    assert not bounds.contains(at(10, 10) + 1)
    with pytest.raises(ValueError):
        WindowBounds(at(10, 10), at(10, 10))


def test_range_10m_step_1m_at_10_10_30():
    window = LogicalWindow(range=10 * MIN, step=MIN)
    bounds = window_at(window, at(10, 10, 30))
    assert bounds == WindowBounds(at(10, 0), at(10, 10))
    assert str(bounds) == "(2010-03-22T10:00:00Z, 2010-03-22T10:10:00Z]"
    assert latest_window_end(window, at(10, 10, 30)) == parse_instant("2010-03-22T10:10:00Z")


def test_golden_example_open_start_closed_end():
    window = LogicalWindow(range=10 * MIN, step=MIN)
    bounds = window_bounds(window, parse_instant("2010-03-22T10:10:00Z"))
    assert not bounds.contains(parse_instant("2010-03-22T10:00:00Z"))
    assert bounds.contains(parse_instant("2010-03-22T10:10:00Z"))
    assert bounds.contains(parse_instant("2010-03-22T10:00:00.000001Z"))
    assert not bounds.contains(parse_instant("2010-03-22T10:10:00.000001Z"))


def test_window_end_exactly_at_t_is_closed_at_t():
    window = LogicalWindow(range=10 * MIN, step=MIN)
    assert latest_window_end(window, at(10, 10)) == at(10, 10)
    assert latest_window_end(window, at(10, 10) - 1) == at(10, 9)


def test_window_bounds_requires_alignment():
    window = LogicalWindow(range=10 * MIN, step=5 * MIN)
    assert window_bounds(window, at(10, 5)) == WindowBounds(at(9, 55), at(10, 5))
    with pytest.raises(ValueError, match="not aligned"):
        window_bounds(window, at(10, 7))
    with pytest.raises(ValueError, match="not aligned"):
        window_bounds(window, at(10, 5) + 1)


def test_negative_instants_use_floor_division():
    window = LogicalWindow(range=10 * MIN, step=5 * MIN)
    assert latest_window_end(window, -1) == -5 * MIN
    assert latest_window_end(window, -5 * MIN) == -5 * MIN
    assert latest_window_end(window, -5 * MIN - 1) == -10 * MIN
    assert window_at(window, -1) == WindowBounds(-15 * MIN, -5 * MIN)
    assert previous_evaluation(7, -1) == -7
    assert previous_evaluation(7, -7) == -7
    assert next_evaluation(7, -7) == 0
    assert next_evaluation(7, -8) == -7
    assert list(evaluation_times(5, -12, 3)) == [-10, -5, 0]
    assert format_instant(window_at(window, parse_instant("1969-12-31T23:59:59Z")).end) == "1969-12-31T23:55:00Z"


# -------------------------------------------------------------------------------------------------------
# Evaluation periods and times
# -------------------------------------------------------------------------------------------------------


def test_default_and_evaluation_period():
    logical = LogicalWindow(range=30 * MIN, step=5 * MIN)
    assert default_period(logical) == 5 * MIN
    assert evaluation_period(logical, None) == 5 * MIN
    assert evaluation_period(logical, 7 * MIN) == 7 * MIN
    assert evaluation_period(PhysicalWindow(10), None) == 60 * SEC
    assert evaluation_period(PhysicalWindow(10), 5 * SEC) == 5 * SEC
    with pytest.raises(ValueError, match="COMPUTED EVERY must be positive"):
        evaluation_period(logical, 0)
    with pytest.raises(ValueError, match="COMPUTED EVERY must be positive"):
        evaluation_period(logical, -MIN)


def test_evaluation_times_examples():
    assert list(evaluation_times(5 * MIN, at(10, 0), at(10, 20))) == [
        at(10, 0), at(10, 5), at(10, 10), at(10, 15), at(10, 20)
    ]
    assert list(evaluation_times(5 * MIN, at(10, 0) + 1, at(10, 20) - 1)) == [at(10, 5), at(10, 10), at(10, 15)]
    assert list(evaluation_times(5 * MIN, at(10, 1), at(10, 4))) == []
    assert list(evaluation_times(5 * MIN, at(10, 20), at(10, 0))) == []
    with pytest.raises(ValueError):
        list(evaluation_times(0, 0, 10))
    assert previous_evaluation(5 * MIN, at(10, 7)) == at(10, 5)
    assert previous_evaluation(5 * MIN, at(10, 5)) == at(10, 5)
    assert next_evaluation(5 * MIN, at(10, 5)) == at(10, 10)
    assert next_evaluation(5 * MIN, at(10, 7)) == at(10, 10)


def test_computed_every_5m_with_step_1m():
    window = LogicalWindow(range=10 * MIN, step=MIN)
    result = list(evaluations(window, 5 * MIN, at(10, 0), at(10, 20)))
    assert [e.at for e in result] == [at(10, m) for m in (0, 5, 10, 15, 20)]
    # 5m is a multiple of the 1m step: every evaluation sees the window ending exactly at its instant.
    assert [e.bounds for e in result] == [WindowBounds(at(9, 50 + m) if m < 10 else at(10, m - 10), at(10, m))
                                          for m in (0, 5, 10, 15, 20)]
    assert result[0] == Evaluation(at(10, 0), WindowBounds(at(9, 50), at(10, 0)))


def test_computed_every_7m_with_step_5m():
    window = LogicalWindow(range=10 * MIN, step=5 * MIN)
    result = list(evaluations(window, 7 * MIN, 0, 35 * MIN))
    assert [e.at // MIN for e in result] == [0, 7, 14, 21, 28, 35]
    # Latest window closed at each instant; the windows ending at 15m and 30m are skipped.
    assert [e.bounds.end // MIN for e in result] == [0, 5, 10, 20, 25, 35]
    assert [e.bounds.start // MIN for e in result] == [-10, -5, 0, 10, 15, 25]


def test_computed_every_7m_with_step_5m_on_a_real_date():
    window = LogicalWindow(range=10 * MIN, step=5 * MIN)
    result = list(evaluations(window, 7 * MIN, at(10, 0), at(10, 30)))
    # 2010-03-22T10:00Z is minute 21_154_200 since the epoch; 21_154_200 = 7·3_022_028 + 4, so the first
    # multiple of 7 minutes at or after 10:00 is 10:03.
    assert [format_instant(e.at) for e in result] == [
        "2010-03-22T10:03:00Z", "2010-03-22T10:10:00Z", "2010-03-22T10:17:00Z", "2010-03-22T10:24:00Z",
    ]
    assert [str(e.bounds) for e in result] == [
        "(2010-03-22T09:50:00Z, 2010-03-22T10:00:00Z]",
        "(2010-03-22T10:00:00Z, 2010-03-22T10:10:00Z]",
        "(2010-03-22T10:05:00Z, 2010-03-22T10:15:00Z]",
        "(2010-03-22T10:10:00Z, 2010-03-22T10:20:00Z]",
    ]


def test_computed_every_shorter_than_step_repeats_windows():
    window = LogicalWindow(range=5 * MIN, step=5 * MIN)
    result = list(evaluations(window, 2 * MIN, 0, 10 * MIN))
    assert [e.at // MIN for e in result] == [0, 2, 4, 6, 8, 10]
    assert [e.bounds.end // MIN for e in result] == [0, 0, 0, 5, 5, 10]


def test_physical_window_evaluations():
    window = PhysicalWindow(1000)
    result = list(evaluations(window, None, at(10, 0), at(10, 3)))
    assert [e.at for e in result] == [at(10, 0), at(10, 1), at(10, 2), at(10, 3)]
    assert all(e.bounds == WindowBounds(None, e.at) for e in result)
    result = list(evaluations(window, 20 * SEC, at(10, 0), at(10, 1)))
    assert [e.at for e in result] == [at(10, 0), at(10, 0, 20), at(10, 0, 40), at(10, 1)]


def test_window_ends_between():
    window = LogicalWindow(range=10 * MIN, step=5 * MIN)
    ends = list(window_ends_between(window, at(10, 1), at(10, 20)))
    assert ends == [at(10, 5), at(10, 10), at(10, 15), at(10, 20)]
    assert list(window_ends_between(window, at(10, 1), at(10, 4))) == []
    with pytest.raises(TypeError):
        list(window_ends_between(PhysicalWindow(5), 0, 10))


# -------------------------------------------------------------------------------------------------------
# Window properties
# -------------------------------------------------------------------------------------------------------


@FEW
@given(logical_windows(), instants)
def test_latest_window_end_is_aligned_and_latest(window, t):
    end = latest_window_end(window, t)
    assert end % window.step == 0
    assert end <= t
    assert t - end < window.step
    bounds = window_at(window, t)
    assert bounds.end == end
    assert bounds.start == end - window.range


@FEW
@given(small_logical_windows(), small_instants)
def test_latest_window_end_brute_force(window, t):
    grid = [e for e in range(-200, 200) if e % window.step == 0]
    assert latest_window_end(window, t) == max(e for e in grid if e <= t)


@FEW
@given(logical_windows(), instants, st.integers(min_value=-3, max_value=3), st.sampled_from(["start", "end"]))
def test_contains_respects_open_start_closed_end(window, t, delta, anchor):
    end = latest_window_end(window, t)
    bounds = window_bounds(window, end)
    tau = (end - window.range if anchor == "start" else end) + delta
    assert bounds.contains(tau) == (end - window.range < tau <= end)


@FEW
@given(logical_windows(), instants, instants)
def test_contains_arbitrary_tau(window, t, tau):
    end = latest_window_end(window, t)
    assert window_at(window, t).contains(tau) == (end - window.range < tau <= end)


@FEW
@given(small_durations, small_instants)
def test_tumbling_windows_cover_every_instant_exactly_once(rho, tau):
    window = LogicalWindow(range=rho, step=rho)
    grid = [e for e in range(-200, 200) if e % rho == 0]
    containing = [e for e in grid if e - rho < tau <= e]
    assert len(containing) == 1
    (e,) = containing
    assert window_at(window, e).contains(tau)
    # The window holding tau is the first one closing at or after tau: latest end at tau + rho - 1.
    assert latest_window_end(window, tau + rho - 1) == e
    assert window_at(window, tau + rho - 1) == WindowBounds(e - rho, e)


@FEW
@given(steps, instants)
def test_tumbling_window_holding_tau_large(rho, tau):
    window = LogicalWindow(range=rho, step=rho)
    e = latest_window_end(window, tau + rho - 1)
    assert e - rho < tau <= e
    assert e % rho == 0


@FEW
@given(small_durations, st.integers(min_value=1, max_value=5), small_instants)
def test_sliding_windows_hold_each_instant_range_over_step_times(sigma, factor, tau):
    rho = sigma * factor
    window = LogicalWindow(range=rho, step=sigma)
    grid = [e for e in range(-200, 200) if e % sigma == 0]
    containing = [e for e in grid if window_bounds(window, e).contains(tau)]
    assert len(containing) == factor
    # And they are exactly the grid ends e with e - rho < tau <= e (independent check).
    assert containing == [e for e in grid if e - rho < tau <= e]


@FEW
@given(small_logical_windows(), small_instants)
def test_sliding_windows_count_when_step_does_not_divide_range(window, tau):
    grid = [e for e in range(-200, 200) if e % window.step == 0]
    count = sum(1 for e in grid if window_bounds(window, e).contains(tau))
    low, high = window.range // window.step, -(-window.range // window.step)
    assert low <= count <= high


# -------------------------------------------------------------------------------------------------------
# Evaluation properties
# -------------------------------------------------------------------------------------------------------


@FEW
@given(small_durations, small_instants, small_instants)
def test_evaluation_times_brute_force(period, start, end):
    expected = [p for p in range(start, end + 1) if p % period == 0]
    assert list(evaluation_times(period, start, end)) == expected


@FEW
@given(steps, instants, st.integers(min_value=0, max_value=50), st.integers(min_value=0, max_value=DAY))
def test_evaluation_times_aligned_increasing_within_range(period, start, periods, extra):
    # At most ~51 evaluation instants, whatever the period.
    length = periods * period + extra % period
    end = start + length
    times = list(evaluation_times(period, start, end))
    assert all(p % period == 0 for p in times)
    assert all(start <= p <= end for p in times)
    assert all(b - a == period for a, b in zip(times, times[1:]))
    # Complete: nothing on the grid is missed just outside the found range.
    first = times[0] if times else None
    if first is not None:
        assert first - period < start
        assert times[-1] + period > end
    else:
        assert length < period


@FEW
@given(steps, instants)
def test_previous_and_next_evaluation(period, t):
    prev = previous_evaluation(period, t)
    nxt = next_evaluation(period, t)
    assert prev % period == 0 and nxt % period == 0
    assert prev <= t < prev + period
    assert t < nxt <= t + period


@FEW
@given(
    st.one_of(
        logical_windows(st.integers(min_value=1, max_value=HOUR)),
        st.builds(PhysicalWindow, st.integers(min_value=1, max_value=10**6)),
    ),
    st.one_of(st.none(), st.integers(min_value=1, max_value=2 * HOUR)),
    instants,
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=DAY),
)
def test_evaluations_use_latest_closed_window(window, every, start, periods, extra):
    period = every if every is not None else (window.step if isinstance(window, LogicalWindow) else 60 * SEC)
    end = start + periods * period + extra % period  # at most ~41 evaluation instants
    result = list(evaluations(window, every, start, end))
    assert [e.at for e in result] == list(range(-(-start // period) * period, end + 1, period))
    for evaluation in result:
        assert evaluation.bounds.end <= evaluation.at
        if isinstance(window, LogicalWindow):
            assert evaluation.bounds.end % window.step == 0
            assert evaluation.at - evaluation.bounds.end < window.step
            assert evaluation.bounds.start == evaluation.bounds.end - window.range
        else:
            assert evaluation.bounds == WindowBounds(None, evaluation.at)


@FEW
@given(small_logical_windows(), small_instants, small_instants)
def test_window_ends_between_brute_force(window, start, end):
    expected = [e for e in range(start, end + 1) if e % window.step == 0]
    assert list(window_ends_between(window, start, end)) == expected


# -------------------------------------------------------------------------------------------------------
# Instants
# -------------------------------------------------------------------------------------------------------


def test_to_and_from_micros():
    assert to_micros(datetime(1970, 1, 1, tzinfo=timezone.utc)) == 0
    assert to_micros(datetime(2010, 3, 22, 10, 10, tzinfo=timezone.utc)) == at(10, 10)
    plus_two = timezone(timedelta(hours=2))
    assert to_micros(datetime(2010, 3, 22, 12, 10, tzinfo=plus_two)) == at(10, 10)
    assert to_micros(datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)) == -1
    assert from_micros(at(10, 10)) == datetime(2010, 3, 22, 10, 10, tzinfo=timezone.utc)
    assert from_micros(-1).utcoffset() == timedelta(0)
    assert from_micros(-1) == datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc)


def test_naive_datetime_is_rejected():
    with pytest.raises(ValueError) as info:
        to_micros(datetime(2010, 3, 22, 10, 10))
    assert "timezone" in str(info.value)
    assert "'Z'" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2010-03-22T10:10:00Z", at(10, 10)),
        ("2010-03-22T12:10:00+02:00", at(10, 10)),
        ("2010-03-22T05:40:00-04:30", at(10, 10)),
        ("2010-03-22T10:10:00+0000", at(10, 10)),
        ("2010-03-22T10:10:00.5Z", at(10, 10, 0, 500_000)),
        ("2010-03-22T10:10:00.123456Z", at(10, 10, 0, 123_456)),
        ("2010-03-22T10:10:00.123456000Z", at(10, 10, 0, 123_456)),
        ("2010-03-22T10:10Z", at(10, 10)),
        ("2010-03-22t10:10:00z", at(10, 10)),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999Z", -1),
        ("1269252600000", at(10, 10)),
        ("0", 0),
        ("-1000", -SEC),
        (" 1269252600000 ", at(10, 10)),
    ],
)
def test_parse_instant_examples(text, expected):
    assert parse_instant(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("yesterday", "invalid instant"),
        ("", "invalid instant"),
        ("2010-03-22", "invalid instant"),
        ("2010-03-22T10:10:00", "no timezone"),
        ("2010-13-01T00:00:00Z", "month"),
        ("2010-02-30T00:00:00Z", "day"),
        ("2010-03-22T25:00:00Z", "hour"),
        ("2010-03-22T10:10:00.1234567Z", "finer than microseconds"),
        ("2010-03-22T10:10:00+25:00", "offset"),
        ("12.5", "invalid instant"),
    ],
)
def test_parse_instant_errors(text, fragment):
    with pytest.raises(ValueError) as info:
        parse_instant(text)
    assert fragment in str(info.value)


def test_parse_instant_naive_error_suggests_z():
    with pytest.raises(ValueError) as info:
        parse_instant("2010-03-22T10:10:00")
    assert "'Z'" in str(info.value)


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (at(10, 10), "2010-03-22T10:10:00Z"),
        (at(10, 10, 0, 500_000), "2010-03-22T10:10:00.500Z"),
        (at(10, 10, 0, 123_000), "2010-03-22T10:10:00.123Z"),
        (at(10, 10, 0, 1), "2010-03-22T10:10:00.000001Z"),
        (at(10, 10, 0, 120_400), "2010-03-22T10:10:00.120400Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59.999999Z"),
        (-SEC, "1969-12-31T23:59:59Z"),
    ],
)
def test_format_instant_examples(micros, text):
    assert format_instant(micros) == text


# datetime's range: 0001-01-01 .. 9999-12-31T23:59:59.999999, in epoch microseconds.
MIN_INSTANT = -62_135_596_800 * SEC
MAX_INSTANT = 253_402_300_800 * SEC - 1
all_instants = st.integers(min_value=MIN_INSTANT, max_value=MAX_INSTANT)


def test_instant_range_limits():
    assert format_instant(MIN_INSTANT) == "0001-01-01T00:00:00Z"
    assert format_instant(MAX_INSTANT) == "9999-12-31T23:59:59.999999Z"
    with pytest.raises(ValueError):
        from_micros(MAX_INSTANT + 1)


@FEW
@given(all_instants)
def test_format_parse_instant_round_trip(us):
    text = format_instant(us)
    assert parse_instant(text) == us
    assert to_micros(from_micros(us)) == us
    # Independent: datetime arithmetic from the epoch.
    expected = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)
    assert from_micros(us) == expected
    assert text == expected.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + (
        "" if expected.microsecond == 0
        else f".{expected.microsecond // 1000:03d}" if expected.microsecond % 1000 == 0
        else f".{expected.microsecond:06d}"
    ) + "Z"


@FEW
@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_parse_instant_with_offsets_matches_datetime(naive, offset_minutes):
    aware = naive.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    expected = (aware - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    assert parse_instant(aware.isoformat()) == expected
    assert to_micros(aware) == expected


@FEW
@given(st.integers(min_value=-(10**14), max_value=10**14))
def test_epoch_milliseconds(ms):
    assert parse_instant(str(ms)) == ms * 1_000


@FEW
@given(st.integers(min_value=MIN_INSTANT + DAY, max_value=-1), logical_windows(st.integers(1, DAY)))
def test_negative_instants(us, window):
    end = latest_window_end(window, us)
    assert end <= us < end + window.step
    assert end % window.step == 0
    # Brute force on whole steps: the truncating answer would be int(us / step) * step, which is wrong
    # for negative instants that are not on the grid.
    if us % window.step:
        assert end < us
    assert parse_instant(format_instant(end)) == end


# --- limits ------------------------------------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_the_limits_are_100_years_32_bit_counts_and_years_1500_to_9500():
    assert MAX_DURATION == 36_525 * DAY
    assert MAX_COUNT == 2_147_483_647
    assert EARLIEST_INSTANT == (datetime(1500, 1, 1, tzinfo=timezone.utc) - EPOCH) // timedelta(microseconds=1)
    assert LATEST_INSTANT == (datetime(9500, 1, 1, tzinfo=timezone.utc) - EPOCH) // timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1500-01-01T00:00:00Z", EARLIEST_INSTANT),
        ("9500-01-01T00:00:00Z", LATEST_INSTANT),
        ("9500-01-01T01:00:00+01:00", LATEST_INSTANT),
        ("2010-03-22T10:10:00Z", at(10, 10)),
        ("-14831769600000", EARLIEST_INSTANT),
    ],
)
def test_an_instant_a_user_gives_may_lie_anywhere_in_years_1500_to_9500(text, expected):
    assert parse_evaluation_instant(text) == expected


@pytest.mark.parametrize(
    "text",
    ["1499-12-31T23:59:59.999999Z", "9500-01-01T00:00:00.000001Z", "0001-01-01T00:00:00Z",
     "9999-12-31T23:59:59Z", "99999999999999999", "-99999999999999999999999"],
)
def test_an_instant_outside_years_1500_to_9500_is_refused_naming_it_and_the_range(text):
    with pytest.raises(ValueError) as info:
        parse_evaluation_instant(text)
    assert str(info.value) == (
        f"the instant '{text}' is outside the instants csparql evaluates, 1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z")


durations_within_limits = st.integers(min_value=1, max_value=MAX_DURATION)


@FEW
@given(
    st.integers(min_value=EARLIEST_INSTANT, max_value=LATEST_INSTANT),
    durations_within_limits,
    durations_within_limits,
    durations_within_limits,
)
def test_every_instant_derived_within_the_limits_lies_in_years_1000_to_9999(us, a, b, period):
    window = LogicalWindow(max(a, b), min(a, b))
    bounds = window_at(window, us)
    derived = [bounds.start, bounds.end, next_evaluation(period, us), previous_evaluation(period, us),
               previous_evaluation(period, bounds.end - 1) - window.range, us - period]
    for instant in derived:
        assert "1000-01-01T00:00:00Z" <= format_instant(instant) <= "9999-12-31T23:59:59.999999Z"
