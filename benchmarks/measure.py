"""Timing and memory: one measured call, the peak memory it reached, and the statistics of repetitions.

``measure(call, processes)`` runs ``call`` while a thread samples the resident memory (RSS) of a set of
processes every few milliseconds, and returns the elapsed wall-clock time, the peak RSS summed over the
processes (and their children at each sample), and the RSS before the call. A Spark driver's JVM heap is read
from its memory pools' peak usage (``JvmHeap``), which the JVM tracks itself between resets, so no
short-lived peak is missed.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

SAMPLE_SECONDS = 0.02


def tree_rss(roots: Sequence[psutil.Process], children: bool = True) -> int:
    """The resident memory of the processes in ``roots`` (and, with ``children``, of their descendants)."""
    total = 0
    seen: set[int] = set()
    for root in roots:
        members = [root]
        if children:
            try:
                members += root.children(recursive=True)
            except psutil.Error:
                pass
        for process in members:
            if process.pid in seen:
                continue
            seen.add(process.pid)
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
    return total


class RssSampler:
    """Samples the RSS of a process tree in a thread until stopped; ``peak`` is the greatest sum seen."""

    def __init__(self, roots: Callable[[], Sequence[psutil.Process]], children: bool = True):
        self.roots = roots
        self.children = children
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.roots(), self.children))
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> RssSampler:
        self.peak = tree_rss(self.roots(), self.children)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss(self.roots(), self.children))


class JvmHeap:
    """The peak heap use of a Spark driver JVM between ``reset()`` and ``peak()``, from its memory pools."""

    def __init__(self, spark):
        self._pools = []
        try:
            factory = spark.sparkContext._jvm.java.lang.management.ManagementFactory
            self._pools = [pool for pool in factory.getMemoryPoolMXBeans() if str(pool.getType()) == "Heap memory"]
        except Exception:  # Spark Connect, or a JVM without the beans: no heap figure
            self._pools = []

    def reset(self) -> None:
        for pool in self._pools:
            pool.resetPeakUsage()

    def peak(self) -> int | None:
        """The sum of the heap pools' peak use since the last reset (an upper bound of the true peak)."""
        if not self._pools:
            return None
        return sum(int(pool.getPeakUsage().getUsed()) for pool in self._pools)


@dataclass
class Measurement:
    """One measured call."""

    seconds: float
    peak_rss: int  # bytes, the measured processes and their children
    base_rss: int  # bytes, the same processes just before the call
    jvm_heap_peak: int | None = None
    value: Any = None

    def to_dict(self) -> dict:
        return {"seconds": self.seconds, "peak_rss_bytes": self.peak_rss, "base_rss_bytes": self.base_rss,
                "jvm_heap_peak_bytes": self.jvm_heap_peak}


def measure(call: Callable[[], Any], roots: Callable[[], Sequence[psutil.Process]], children: bool = True,
            heap: JvmHeap | None = None) -> Measurement:
    """Run ``call`` once, timing it and sampling the memory of ``roots`` (see the module docstring)."""
    base = tree_rss(roots(), children)
    if heap is not None:
        heap.reset()
    with RssSampler(roots, children) as sampler:
        clock = time.perf_counter()
        value = call()
        seconds = time.perf_counter() - clock
    return Measurement(seconds, sampler.peak, base, heap.peak() if heap is not None else None, value)


def median(values: Sequence[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def fit_power(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """The least-squares fit ``y = a · x^b`` through positive (x, y) points, as (a, b); None below 2 points."""
    usable = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(usable) < 2:
        return None
    xs, ys = zip(*usable)
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in usable) / spread
    return math.exp(mean_y - slope * mean_x), slope


def extrapolate(points: Sequence[tuple[float, float]], x: float) -> float | None:
    """The time at size ``x`` predicted from measured (size, time) points: a power law fitted through them,
    never growing slower than linearly past the largest measured size (loading is at least linear)."""
    if not points:
        return None
    largest = max(points)
    linear = largest[1] * x / largest[0]
    fit = fit_power(points)
    if fit is None:
        return linear
    a, b = fit
    return max(linear, a * x ** b)


def linear_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of y against x; None below 2 points or when every x is the same."""
    if len(points) < 2:
        return None
    xs, ys = zip(*points)
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
