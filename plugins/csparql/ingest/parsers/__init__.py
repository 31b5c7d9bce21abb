"""What parses an RDF format into the stream and static tables' columns: N-Triples and timestamped N-Quads line
by line (``lines``), byte ranges of a file as the executors parse them (``ranges``), rejected lines (``rejects``),
timestamped named graphs from TriG, TriX, JSON-LD and N-Quads (``graphs``, ``graph_parts``).

Spark's executors import these modules, so none of them imports Spark or Delta; this file imports nothing.
"""
