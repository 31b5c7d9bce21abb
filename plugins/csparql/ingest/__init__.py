"""Ingest: RDF streams and static graphs into the warehouse's Delta tables.

The driver's side (``ingest.py``: checks, byte ranges planned, Spark jobs, one commit; ``landing.py``: landing
folders landed exactly once) imports Spark; the executors' side (``lines.py``: parsing lines, ``ranges.py``:
byte ranges of a file, ``rejects.py``: rejected lines) imports neither Spark nor Delta. This file imports
nothing, so that executors importing ``csparql.ingest.lines`` load no more than it needs.
"""
