"""The differential conformance harness: every query is evaluated on Spark and by an independent evaluator
(pyoxigraph over the same window triples and static graphs, or a W3C test's expected results), and the two
result multisets are compared. See ``README.md`` in this folder."""
