"""Window arithmetic for C-SPARQL: durations, instants, window bounds and evaluation times.

Everything here is pure and uses only the standard library. Time is event time in UTC with microsecond
precision; instants and durations are plain ``int`` microseconds (``Micros``) counted from the Unix epoch
(1970-01-01T00:00:00Z). Instants before 1970 are negative and handled with floor division throughout.

Semantics (docs/semantics.md, *Logical windows*, *Physical windows* and *When a query is evaluated*):

* A logical window ``[RANGE ρ STEP σ]`` evaluated with window end t_f contains the triples with timestamp τ
  such that ``t_f − ρ < τ ≤ t_f`` (open start, closed end). Window ends are whole multiples of σ counted from
  the epoch, so a replay always sees the same windows. ``TUMBLING`` means σ = ρ. σ > ρ, or a non-positive ρ
  or σ, is invalid.
* A physical window ``[TRIPLES n]`` evaluated at t_f contains the n triples with the greatest
  (τ, arrival order) among those with τ ≤ t_f. Its bounds have no start and end t_f.
* ``COMPUTED EVERY e`` evaluates the query at every whole multiple of e from the epoch. Each evaluation at
  instant t uses the latest window that closes at or before t: end ``floor(t/σ)·σ`` for a logical window,
  end t for a physical one. Without ``COMPUTED EVERY`` the period is σ (logical) or 60 s (physical).
  An e that is not a multiple of σ is accepted: some windows may then be seen by several evaluations, and
  others by none.

Limits (docs/language.md, "Limits"): the arithmetic here is exact on any int, but the instants it produces go
through Python datetimes, Arrow and Spark timestamps and Airflow dates. A query's durations are therefore at
most ``MAX_DURATION`` (100 years) and its TRIPLES count at most ``MAX_COUNT``, and the instants a user gives
lie in ``[EARLIEST_INSTANT, LATEST_INSTANT]`` (``check_instant``), so that every window bound and evaluation
instant derived from them stays representable everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

__all__ = [
    "Micros",
    "MICROS_PER",
    "unit_micros",
    "canonical_unit",
    "parse_duration",
    "format_duration",
    "LogicalWindow",
    "PhysicalWindow",
    "Window",
    "WindowBounds",
    "PHYSICAL_WINDOW_DEFAULT_PERIOD",
    "default_period",
    "evaluation_period",
    "latest_window_end",
    "window_bounds",
    "window_at",
    "evaluation_times",
    "to_micros",
    "from_micros",
    "parse_instant",
    "format_instant",
    "MAX_DURATION",
    "MAX_COUNT",
    "EARLIEST_INSTANT",
    "LATEST_INSTANT",
    "INSTANT_RANGE",
    "check_instant",
    "parse_evaluation_instant",
]

Micros = int
"""Instants (microseconds since the Unix epoch, UTC) and durations (microseconds)."""

# ---------------------------------------------------------------------------------------------------------
# Units and durations
# ---------------------------------------------------------------------------------------------------------

MICROS_PER = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
"""Microseconds in one of each canonical unit."""

_MICROSECOND_UNIT = "us"

MAX_DURATION = 36_525 * MICROS_PER["d"]
"""The longest duration a query may write (RANGE, STEP, COMPUTED EVERY): 100 years of 365.25 days, 36525d."""

MAX_COUNT = 2**31 - 1
"""The largest count a query may write (TRIPLES, LIMIT, OFFSET): Spark's LIMIT and OFFSET take 32-bit ints."""

EARLIEST_INSTANT = -14_831_769_600_000_000
"""1500-01-01T00:00:00Z, the earliest instant a user may give (an evaluation instant, a watermark)."""

LATEST_INSTANT = 237_623_846_400_000_000
"""9500-01-01T00:00:00Z, the latest instant a user may give. With durations of at most ``MAX_DURATION``, the
window bounds and evaluation instants derived from instants in ``[EARLIEST_INSTANT, LATEST_INSTANT]`` stay
within years 1000..9999, which every layer represents (Python datetimes stop at 9999, and the predicates the
engine gives delta-rs write a year before 1000 without its leading zeros, which delta-rs cannot parse)."""

INSTANT_RANGE = "1500-01-01T00:00:00Z to 9500-01-01T00:00:00Z"
"""``[EARLIEST_INSTANT, LATEST_INSTANT]`` as users read it in messages."""

# Every accepted spelling (lower case) -> canonical short form.
_UNIT_ALIASES: dict[str, str] = {}
for _canonical, _spellings in {
    "us": ("us", "usec", "usecs", "micros", "microsecond", "microseconds"),
    "ms": ("ms", "msec", "msecs", "millis", "millisecond", "milliseconds"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "m": ("m", "min", "mins", "minute", "minutes"),
    "h": ("h", "hour", "hours", "hr", "hrs"),
    "d": ("d", "day", "days"),
}.items():
    for _spelling in _spellings:
        _UNIT_ALIASES[_spelling] = _canonical
del _canonical, _spellings, _spelling

_ACCEPTED_UNITS = ", ".join(_UNIT_ALIASES)


def _require_int(value: object, what: str) -> int:
    """Return ``value`` if it is a genuine ``int`` (not a ``bool``); raise ``TypeError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int number of microseconds, got {value!r}")
    return value


def canonical_unit(unit: str) -> str:
    """Return the canonical short form (``ms``, ``s``, ``m``, ``h``, ``d``, or ``us``) of a unit spelling.

    Spellings are matched case-insensitively and ignoring surrounding whitespace, so ``"MIN"``,
    ``"minutes"`` and ``"m"`` all give ``"m"``. An unknown unit raises ``ValueError`` naming it and
    listing the accepted spellings.
    """
    if not isinstance(unit, str):
        raise TypeError(f"time unit must be a string, got {unit!r}")
    key = unit.strip().lower()
    try:
        return _UNIT_ALIASES[key]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}; accepted units are: {_ACCEPTED_UNITS}") from None


def unit_micros(unit: str) -> int:
    """Return the number of microseconds in one ``unit`` (any spelling accepted by ``canonical_unit``)."""
    canonical = canonical_unit(unit)
    return 1 if canonical == _MICROSECOND_UNIT else MICROS_PER[canonical]


_DURATION_RE = re.compile(r"\s*(?P<sign>[+-]?)(?P<whole>\d*)(?:\.(?P<fraction>\d+))?\s*(?P<unit>[A-Za-z]+)\s*")


def parse_duration(text: str) -> int:
    """Parse a duration such as ``"5m"``, ``"5 m"``, ``"10 MIN"``, ``"24 hours"``, ``"1.5h"`` or ``"250ms"``.

    Returns the duration in microseconds. The amount is a decimal number (optionally signed) followed by a
    unit in any spelling accepted by ``canonical_unit`` (including ``us`` for microseconds). A decimal amount
    is allowed only if the result is a whole number of microseconds. Anything else raises ``ValueError``
    with a message saying what is wrong. Every output of ``format_duration`` parses back to its input.
    """
    if not isinstance(text, str):
        raise TypeError(f"duration must be a string, got {text!r}")
    match = _DURATION_RE.fullmatch(text)
    if match is None:
        if text.strip() == "":
            raise ValueError("empty duration; expected an amount and a unit such as '5m' or '250 ms'")
        raise ValueError(
            f"invalid duration {text!r}; expected an amount and a unit such as '5m', '10 MIN' or '1.5h'"
        )
    unit = match["unit"]
    try:
        per_unit = unit_micros(unit)
    except ValueError:
        raise ValueError(
            f"invalid duration {text!r}: unknown time unit {unit!r}; accepted units are: {_ACCEPTED_UNITS}"
        ) from None
    whole, fraction = match["whole"], match["fraction"] or ""
    if not whole and not fraction:
        raise ValueError(f"invalid duration {text!r}: the amount is missing; expected e.g. '5m' or '1.5h'")
    # Exact integer arithmetic: amount = (whole·10^k + fraction) / 10^k with k fractional digits.
    scale = 10 ** len(fraction)
    scaled = (int(whole or "0") * scale + int(fraction or "0")) * per_unit
    if scaled % scale:
        raise ValueError(f"invalid duration {text!r}: it is not a whole number of microseconds")
    micros = scaled // scale
    return -micros if match["sign"] == "-" else micros


_FORMAT_UNITS = (("d", MICROS_PER["d"]), ("h", MICROS_PER["h"]), ("m", MICROS_PER["m"]),
                 ("s", MICROS_PER["s"]), ("ms", MICROS_PER["ms"]), (_MICROSECOND_UNIT, 1))


def format_duration(micros: int) -> str:
    """Format a duration in microseconds as canonical short text, using the largest unit dividing it exactly.

    For example ``300_000_000 -> "5m"``, ``90_000_000 -> "90s"``, ``86_400_000_000 -> "1d"``,
    ``250_000 -> "250ms"`` and ``1_500 -> "1500us"``. Zero is ``"0s"``; negative durations get a leading
    ``-``. The function is total on ints and ``parse_duration(format_duration(x)) == x`` for every int x.
    """
    _require_int(micros, "duration")
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    magnitude = abs(micros)
    for unit, size in _FORMAT_UNITS:
        if magnitude % size == 0:
            return f"{sign}{magnitude // size}{unit}"
    raise AssertionError("unreachable: every int is a whole number of microseconds")  # pragma: no cover


# ---------------------------------------------------------------------------------------------------------
# Windows and their bounds
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogicalWindow:
    """A time-based window ``[RANGE range STEP step]`` (durations in microseconds).

    Promises ``0 < step <= range`` (``ValueError`` otherwise). A window ending at t_f holds the triples with
    ``t_f - range < τ <= t_f``; window ends are the multiples of ``step`` counted from the epoch.
    """

    range: int
    step: int

    def __post_init__(self) -> None:
        _require_int(self.range, "window RANGE")
        _require_int(self.step, "window STEP")
        if self.range <= 0:
            raise ValueError(f"window RANGE must be positive, got {format_duration(self.range)}")
        if self.step <= 0:
            raise ValueError(f"window STEP must be positive, got {format_duration(self.step)}")
        if self.step > self.range:
            raise ValueError(
                f"window STEP {format_duration(self.step)} is longer than its RANGE "
                f"{format_duration(self.range)}; the step must not exceed the range"
            )

    @property
    def tumbling(self) -> bool:
        """True when the step equals the range, so that consecutive windows neither overlap nor leave gaps."""
        return self.step == self.range

    def __str__(self) -> str:
        """The window as C-SPARQL text, e.g. ``RANGE 30m STEP 5m`` or ``RANGE 5m TUMBLING``."""
        if self.tumbling:
            return f"RANGE {format_duration(self.range)} TUMBLING"
        return f"RANGE {format_duration(self.range)} STEP {format_duration(self.step)}"


@dataclass(frozen=True)
class PhysicalWindow:
    """A count-based window ``[TRIPLES count]``: the ``count`` latest triples (by τ, then arrival order).

    Promises ``count >= 1`` (``ValueError`` otherwise).
    """

    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int):
            raise TypeError(f"TRIPLES count must be an int, got {self.count!r}")
        if self.count < 1:
            raise ValueError(f"TRIPLES count must be at least 1, got {self.count}")

    def __str__(self) -> str:
        """The window as C-SPARQL text, e.g. ``TRIPLES 1000``."""
        return f"TRIPLES {self.count}"


Window = LogicalWindow | PhysicalWindow


@dataclass(frozen=True)
class WindowBounds:
    """The time interval ``(start, end]`` of one window; ``start`` is ``None`` when unbounded (physical windows).

    Promises ``start < end`` when ``start`` is given (``ValueError`` otherwise).
    """

    start: int | None
    end: int

    def __post_init__(self) -> None:
        _require_int(self.end, "window end")
        if self.start is not None:
            _require_int(self.start, "window start")
            if self.start >= self.end:
                raise ValueError(
                    f"window start {_describe_instant(self.start)} must be before its end "
                    f"{_describe_instant(self.end)}"
                )

    def contains(self, tau: int) -> bool:
        """True iff ``start < tau <= end`` (only ``tau <= end`` when there is no start)."""
        if tau > self.end:
            return False
        return self.start is None or self.start < tau

    def __str__(self) -> str:
        """The interval as text, e.g. ``(2010-03-22T10:00:00Z, 2010-03-22T10:10:00Z]``."""
        start = "-inf" if self.start is None else format_instant(self.start)
        return f"({start}, {format_instant(self.end)}]"


# ---------------------------------------------------------------------------------------------------------
# Evaluation periods and window placement
# ---------------------------------------------------------------------------------------------------------

PHYSICAL_WINDOW_DEFAULT_PERIOD = 60_000_000
"""How often a query over a physical window is evaluated without COMPUTED EVERY: 60 seconds."""


def _check_window(window: object) -> None:
    if not isinstance(window, (LogicalWindow, PhysicalWindow)):
        raise TypeError(f"expected a LogicalWindow or PhysicalWindow, got {window!r}")


def _check_period(period: int, what: str = "evaluation period") -> int:
    _require_int(period, what)
    if period <= 0:
        raise ValueError(f"{what} must be positive, got {format_duration(period)}")
    return period


def default_period(window: Window) -> int:
    """The evaluation period without COMPUTED EVERY: the step of a logical window, 60 s for a physical one."""
    _check_window(window)
    if isinstance(window, LogicalWindow):
        return window.step
    return PHYSICAL_WINDOW_DEFAULT_PERIOD


def evaluation_period(window: Window, computed_every: int | None) -> int:
    """The evaluation period: ``computed_every`` if given (must be > 0), else ``default_period(window)``."""
    _check_window(window)
    if computed_every is None:
        return default_period(window)
    return _check_period(computed_every, "COMPUTED EVERY")


def latest_window_end(window: Window, t: int) -> int:
    """The end of the latest window that closes at or before instant ``t``.

    For a logical window this is ``floor(t / step) * step`` (so ``end <= t < end + step``, also for negative
    t); for a physical window it is ``t`` itself.
    """
    _check_window(window)
    _require_int(t, "instant")
    if isinstance(window, LogicalWindow):
        return t - t % window.step  # Python's % floors, so this is floor(t/step)*step
    return t


def window_bounds(window: Window, end: int) -> WindowBounds:
    """The bounds of the window of ``window`` that ends at ``end``.

    Logical: ``(end - range, end]``; ``end`` must be a multiple of the step (``ValueError`` otherwise).
    Physical: ``(None, end]``.
    """
    _check_window(window)
    _require_int(end, "window end")
    if isinstance(window, LogicalWindow):
        if end % window.step != 0:
            raise ValueError(
                f"window end {_describe_instant(end)} is not aligned to the step {format_duration(window.step)} "
                f"(window ends are whole multiples of the step from 1970-01-01T00:00:00Z)"
            )
        return WindowBounds(end - window.range, end)
    return WindowBounds(None, end)


def window_at(window: Window, t: int) -> WindowBounds:
    """The bounds of the latest window that closes at or before instant ``t``."""
    return window_bounds(window, latest_window_end(window, t))


def evaluation_times(period: int, start: int, end: int) -> Iterator[int]:
    """Every multiple of ``period`` (> 0) in ``[start, end]``, in increasing order (nothing if start > end)."""
    _check_period(period)
    _require_int(start, "start instant")
    _require_int(end, "end instant")
    return _multiples(period, start, end)


def _multiples(period: int, start: int, end: int) -> Iterator[int]:
    at = -((-start) // period) * period  # ceil(start / period) * period
    while at <= end:
        yield at
        at += period


# ---------------------------------------------------------------------------------------------------------
# Instants
# ---------------------------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def to_micros(dt: datetime) -> int:
    """Microseconds since the epoch of an aware ``datetime`` (converted to UTC exactly).

    A naive datetime raises ``ValueError``: its instant is ambiguous, so give a timezone (e.g. 'Z').
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a datetime, got {dt!r}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(
            f"naive datetime {dt.isoformat()} has no timezone; give a timezone (e.g. 'Z' for UTC or '+02:00')"
        )
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: int) -> datetime:
    """The aware UTC ``datetime`` of an instant in microseconds since the epoch (years 1..9999)."""
    _require_int(us, "instant")
    try:
        return _EPOCH + timedelta(microseconds=us)
    except OverflowError:
        raise ValueError(f"instant {us} microseconds from the epoch is outside years 1..9999") from None


_INSTANT_RE = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)
_EPOCH_MILLIS_RE = re.compile(r"[+-]?\d+")


def parse_instant(text: str) -> int:
    """Parse an instant into microseconds since the epoch.

    Accepts ISO 8601 date-times with a timezone, 'Z' or an offset (``2010-03-22T10:10:00Z``,
    ``2010-03-22T12:10:00+02:00``), with optional fractional seconds down to microseconds (further digits
    must be zeros); and a plain integer, meaning milliseconds since the epoch. Anything else, including a
    date-time without a timezone, raises ``ValueError`` saying what is wrong.
    """
    if not isinstance(text, str):
        raise TypeError(f"instant must be a string, got {text!r}")
    stripped = text.strip()
    if _EPOCH_MILLIS_RE.fullmatch(stripped):
        return int(stripped) * 1_000
    match = _INSTANT_RE.fullmatch(stripped)
    if match is None:
        raise ValueError(
            f"invalid instant {text!r}; expected an ISO 8601 date-time with a timezone such as "
            f"'2010-03-22T10:10:00Z' or '2010-03-22T12:10:00+02:00', or an integer number of epoch milliseconds"
        )
    zone = match["zone"]
    if zone is None:
        raise ValueError(
            f"instant {text!r} has no timezone; give a timezone, e.g. 'Z' for UTC ('{stripped}Z') or '+02:00'"
        )
    fraction = match["fraction"] or ""
    if len(fraction) > 6 and fraction[6:].strip("0"):
        raise ValueError(f"instant {text!r} is finer than microseconds; at most 6 fractional digits are kept")
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    if zone in ("Z", "z"):
        offset = timedelta(0)
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or "0")
        if hours > 23 or minutes > 59:
            raise ValueError(f"instant {text!r} has an invalid timezone offset {zone!r}")
        offset = sign * timedelta(hours=hours, minutes=minutes)
    try:
        dt = datetime(
            int(match["year"]), int(match["month"]), int(match["day"]),
            int(match["hour"]), int(match["minute"]), int(match["second"] or "0"), micro,
            tzinfo=timezone(offset),
        )
    except ValueError as error:
        raise ValueError(f"invalid instant {text!r}: {error}") from None
    return to_micros(dt)


def check_instant(us: int, written: str | None = None) -> int:
    """``us`` itself when it lies in ``[EARLIEST_INSTANT, LATEST_INSTANT]``; otherwise ``ValueError`` naming the
    instant (as ``written``, when given) and the range."""
    _require_int(us, "instant")
    if not EARLIEST_INSTANT <= us <= LATEST_INSTANT:
        shown = repr(written) if written is not None else _describe_instant(us)
        raise ValueError(f"the instant {shown} is outside the instants csparql evaluates, {INSTANT_RANGE}")
    return us


def parse_evaluation_instant(text: str) -> int:
    """``parse_instant(text)``, refused (``ValueError``) outside the instants csparql evaluates
    (``check_instant``): what every command and page that takes an instant from a user reads it with."""
    return check_instant(parse_instant(text), text.strip() if isinstance(text, str) else None)


def _describe_instant(us: int) -> str:
    """``format_instant(us)`` for messages, falling back to the raw number outside years 1..9999."""
    try:
        return format_instant(us)
    except ValueError:
        return f"{us}us after the epoch"


def format_instant(us: int) -> str:
    """Format an instant as ISO 8601 UTC text, e.g. ``2010-03-22T10:10:00Z``.

    A fraction is added only when non-zero: three digits when it is whole milliseconds
    (``...T10:10:00.500Z``), else six (``...T10:10:00.000001Z``). ``parse_instant`` reads it back exactly.
    """
    dt = from_micros(us)
    text = (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    )
    if dt.microsecond:
        if dt.microsecond % 1_000 == 0:
            text += f".{dt.microsecond // 1_000:03d}"
        else:
            text += f".{dt.microsecond:06d}"
    return text + "Z"
