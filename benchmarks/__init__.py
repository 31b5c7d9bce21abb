"""csparql's benchmarks: window evaluation against its peers and against the scan limit.

``./bench.sh --quick`` or ``./bench.sh --full`` generates seeded data at the sizes of the mode, lands it through
the product's ingest, measures every system side by side and writes a run folder (``results.json``,
``table.md``, PNG plots, Spark plans). ``benchmarks/README.md`` describes the workloads, systems and figures.
"""
