"""SRBench v1.0 on csparql: a seeded generator of its data at any size, and the workload the benchmarks
load. The 17 queries, rewritten in C-SPARQL, are in ``examples/srbench`` (see its README and docs/srbench.md).

- ``generate(size, seed)`` (``csparql.srbench.generator``): the stream and the static graphs in memory;
- ``write_files(data, folder)`` and ``generate_workload(warehouse, size, seed)``
  (``csparql.srbench.workload``): the data as files, landed in a warehouse through ingest and load-static;
- ``csparql srbench generate``: the same from the command line.
"""

from csparql.srbench.generator import Scenario, Size, SRBenchData, generate
from csparql.srbench.workload import Workload, generate_workload, query_files, write_files

__all__ = ["Scenario", "Size", "SRBenchData", "Workload", "generate", "generate_workload", "query_files", "write_files"]
