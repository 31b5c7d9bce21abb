"""The engine: evaluating windows on Spark over the Delta tables, writing their results and runs, and reading
them back (ingest is ``csparql.ingest``)."""
