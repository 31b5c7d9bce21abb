"""Static parts of plans kept in Spark's cache across evaluations.

A basic graph pattern that reads only static graphs (the D-Graph's static part, the LarKC engine design, §4) gives
the same solutions at every window as long as those graphs do not change. ``StaticParts`` keeps its DataFrame,
persisted in Spark's cache, under a key made of the pattern, the column names the compiler gave its variables, and
the Delta version of every graph it reads: later windows reuse both the DataFrame (no plan to build) and its cached
rows (no file to read, no join to compute again). A load that changes a graph gives its parts a new key, so a stale
part is never read; the part of the older version is unpersisted.

Spark's cache is shared by every session of one Spark application (and so by every client of one Spark
Connect server, which finds a part another process cached when it builds the same plan). Entries are kept per
session, at most ``MAX_PARTS`` of them, the least recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from pyspark.sql import DataFrame

MAX_PARTS = 64
"""Static parts kept per process."""


class StaticParts:
    """Cached static parts by key (see the module docstring); safe to use from several threads."""

    def __init__(self, capacity: int = MAX_PARTS) -> None:
        self.capacity = capacity
        self._parts: OrderedDict[tuple, DataFrame] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, shape: Hashable, versions: Hashable, build: Callable[[], DataFrame]) -> DataFrame:
        """The part of ``shape`` at these graph versions: built by ``build()`` and persisted the first time,
        the same DataFrame afterwards."""
        key = (shape, versions)
        with self._lock:
            if key in self._parts:
                self._parts.move_to_end(key)
                return self._parts[key]
        frame = build().cache()
        with self._lock:
            for old in [k for k in self._parts if k[0] == shape and k != key]:
                self._drop(old)
            self._parts[key] = frame
            while len(self._parts) > self.capacity:
                self._drop(next(iter(self._parts)))
        return frame

    def _drop(self, key: tuple) -> None:
        frame = self._parts.pop(key)
        try:
            frame.unpersist()
        except Exception:  # noqa: BLE001 - the session may be gone; Spark then dropped its cache anyway
            pass

    def clear(self) -> None:
        with self._lock:
            for key in list(self._parts):
                self._drop(key)


STATIC_PARTS = StaticParts()
"""The process's cache of static parts."""
