"""Ingest: RDF streams and static graphs into the warehouse's Delta tables.

This package holds what drives an ingest: the checked request and its one commit (``ingest.py``), the parse and
stage of one ingest (``job.py``, ``spark_job.py``), landing folders (``landing.py``), pushed bodies
(``pushed.py``) and message buses (``sources.py``). What parses a format is in ``csparql.ingest.parsers``, which
imports neither Spark nor Delta, since Spark's executors run it. This file imports nothing, so that executors
importing a parser load no more than it needs.
"""
