"""The engine: evaluating plans on Spark, reading and writing Delta tables, ingesting streams."""
