"""Storage: the warehouse layout, the Arrow schemas of its tables, and Delta access through delta-rs.

Nothing here imports Spark: Delta logs are read and written with the ``deltalake`` package, and Spark only
ever reads the Parquet files a log lists (or writes files that delta-rs then commits).
"""
