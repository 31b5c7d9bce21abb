"""Storage: the storage contract and Delta access through delta-rs.

The contract is written down here once: the Arrow schemas and the term struct (``schema``, ``terms``), the
namespaces (``vocabulary``), instants and hour buckets (``instants``), the warehouse's layout, its own tables and
the keys csparql records in Delta properties and commit metadata (``warehouse``, ``tables``). Nothing here
imports Spark: Delta logs are read and written with the ``deltalake`` package, and Spark only ever reads the
Parquet files a log lists (or writes files that delta-rs then commits).
"""
