"""``csparql srbench generate``: SRBench v1.0 data as files, and optionally landed in a warehouse."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_REFUSED = 0, 1


def register(commands) -> None:
    srbench = commands.add_parser(
        "srbench",
        help="SRBench data and workload",
        description="SRBench v1.0: generate its data (weather observations, station metadata, GeoNames, "
        "DBpedia and the ontologies) at any size, seeded.",
    )
    actions = srbench.add_subparsers(dest="action", metavar="ACTION", required=True)
    generate = actions.add_parser(
        "generate",
        help="generate SRBench data",
        description="Write SRBench data into a folder: observations.nq (timestamped N-Quads), sensors.nt, "
        "geonames.nt, dbpedia.nt and ontology.ttl. With --load, also land them in the warehouse (the stream "
        "http://www.cwi.nl/SRBench/observations and the graphs http://www.cwi.nl/SRBench/{sensors,geonames,"
        "dbpedia,ontology}, each replaced). The same seed and size always give the same data.",
    )
    generate.add_argument("--out", metavar="DIR", help="folder for the files (default: <warehouse>/landing/srbench with --load, else ./srbench-data)")
    generate.add_argument("--stations", type=int, default=12, help="weather stations (at least 6; default 12)")
    generate.add_argument("--hours", type=int, default=30, help="hours of observations (at least 15; default 30)")
    generate.add_argument("--rate", type=int, default=1, help="samples per property per station and hour (default 1)")
    generate.add_argument("--towns", type=int, default=3, help="filler GeoNames towns per county (default 3)")
    generate.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    generate.add_argument("--start", default="2005-08-28T00:00:00Z", help="instant of the first hour (default 2005-08-28T00:00:00Z)")
    generate.add_argument("--load", action="store_true", help="also land the files in the warehouse")
    generate.add_argument("--warehouse", metavar="DIR", help="the warehouse folder (default: $CSPARQL_WAREHOUSE, else ./delta_tables)")
    generate.add_argument("--master", metavar="URL", help="Spark master for --load (default: $CSPARQL_SPARK_MASTER, else $SPARK_REMOTE, else local[*])")
    generate.set_defaults(run=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    from csparql.srbench.generator import Size, generate
    from csparql.srbench.workload import write_files
    from csparql.core.windows import from_micros, parse_evaluation_instant

    try:
        size = Size(args.stations, args.hours, args.rate, args.towns)
        start = from_micros(parse_evaluation_instant(args.start))
    except ValueError as error:
        print(f"csparql srbench generate: {error}", file=sys.stderr)
        return EXIT_REFUSED
    if args.load:
        from csparql.srbench.workload import generate_workload
        from csparql.runtime.session import spark_session
        from csparql.storage.warehouse import Warehouse

        warehouse = Warehouse.locate(args.warehouse)
        workload = generate_workload(warehouse, size, args.seed, args.out, spark_session(args.master), start)
        for report in workload.reports:
            print(f"<{report.target}>: {report.landed} triples landed, {report.rejected} rejected")
    else:
        workload = write_files(generate(size, args.seed, start), args.out or "srbench-data")
    data = workload.data
    print(f"{len(data.stream)} stream triples and {sum(len(g) for g in data.graphs.values())} static triples "
          f"({len(data.stations)} stations, {size.hours} hours, seed {args.seed}) in {workload.folder}")
    return EXIT_OK
