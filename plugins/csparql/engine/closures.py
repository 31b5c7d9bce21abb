"""The closure store of a warehouse: closures of static graphs kept in ``_csparql/closures``, across windows and
processes (``csparql.spark.closures`` says what a closure and its key are).

One Delta table holds every closure, partitioned by ``family`` (the closure whatever the versions of its graphs)
and ``closure`` (the key: the closure at exactly these versions). Columns: ``a``, ``b`` (term structs) and
``g`` (the graph, or null). Each stored closure also has one marker row with null ``a`` and ``b``, so that an
empty closure is known to be stored; readers skip it.

- ``fetch(key)`` reads the live files of the key's partition (never a folder listing). Should two processes
  have stored the same key at once, each wrote its files under its own writer folder; readers take the files of
  the first writer (by name), so they all read one copy.
- ``store(key, pairs)`` lets Spark write the pairs into ``family=…/closure=…/<writer>/`` inside the table and
  commits those files in one commit; then it removes the other members of the family (closures of older
  versions of the same graphs) in a second commit. Removal is logical: a process still reading an older
  closure keeps its files until a vacuum.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from csparql.spark.closures import ClosureKey
from csparql.spark.schema import CLOSURES_FILE_SCHEMA
from csparql.storage import delta, schema
from csparql.storage.tables import CLOSURE, KIND_PROPERTY, OPERATION
from csparql.storage.warehouse import Warehouse

class DeltaClosureStore:
    """Closures kept in the warehouse's ``_csparql/closures`` table (see the module docstring)."""

    def __init__(self, spark: SparkSession, warehouse: Warehouse):
        self.spark = spark
        self.path = warehouse.closures

    def fetch(self, key: ClosureKey) -> DataFrame | None:
        files = self.files(key)
        if not files:
            return None
        frame = self.spark.read.schema(CLOSURES_FILE_SCHEMA).parquet(*files)
        return frame.where(F.col("a").isNotNull())

    def files(self, key: ClosureKey) -> list[str]:
        """The Parquet files holding the closure stored under ``key`` (empty when it is not stored)."""
        if not delta.exists(self.path):
            return []
        live = [
            f for f in delta.live_files(delta.open_table(self.path), self.path)
            if f.partition.get("closure") == key.id
        ]
        if not live:
            return []
        first = min(_writer(f.uri) for f in live)
        return sorted(f.uri for f in live if _writer(f.uri) == first)

    def store(self, key: ClosureKey, pairs: DataFrame) -> DataFrame:
        delta.ensure(self.path, schema.CLOSURES, schema.CLOSURES_PARTITIONS, {KIND_PROPERTY: "closures"})
        writer = uuid.uuid4().hex
        folder = self.path / f"family={key.family}" / f"closure={key.id}" / writer
        marker = self.spark.createDataFrame([(None, None, None)], CLOSURES_FILE_SCHEMA)
        try:
            pairs.select("a", "b", "g").unionByName(marker).write.parquet(str(folder))
            files = [(str(file), {"family": key.family, "closure": key.id}) for file in sorted(folder.glob("*.parquet"))]
            delta.commit_files(
                self.path, files, schema.CLOSURES, schema.CLOSURES_PARTITIONS, timestamp_column=None,
                metadata={OPERATION: "store-closure", CLOSURE: key.description},
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._remove_older(key)
        return self.fetch(key)

    def _remove_older(self, key: ClosureKey) -> None:
        """Remove the family's other members: closures of other versions of the same graphs."""
        table = delta.open_table(self.path)
        stale = {
            f.partition.get("closure") for f in delta.live_files(table, self.path)
            if f.partition.get("family") == key.family and f.partition.get("closure") != key.id
        }
        if not stale:
            return
        try:
            table.delete(f"family = '{key.family}' AND closure != '{key.id}'")
        except Exception:  # a concurrent writer won: the stale closure stays, unread, until the next store
            pass

    def stored_keys(self) -> dict[str, set[str]]:
        """Every stored closure id, by family (what tests and ``csparql`` tools can inspect)."""
        if not delta.exists(self.path):
            return {}
        found: dict[str, set[str]] = {}
        for f in delta.live_files(delta.open_table(self.path), self.path):
            found.setdefault(f.partition.get("family"), set()).add(f.partition.get("closure"))
        return found


def _writer(uri: str) -> str:
    return Path(unquote(uri)).parent.name
