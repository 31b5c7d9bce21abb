"""``csparql check`` and ``csparql explain``: the language front end from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from csparql.algebra.sexpr import format_plan
from csparql.frontend import compile_query, parse_query
from csparql.language.errors import QueryError
from csparql.language.printer import format_query
from csparql.optimizer import optimize


def register(commands) -> None:
    check = commands.add_parser(
        "check",
        help="validate queries and print them normalised",
        description="Validate C-SPARQL queries. Prints each valid query normalised; reports every problem "
        "with line, column and a caret. Exit 0 when all are valid, 1 otherwise. '-' reads standard input.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="query files ('-' for standard input)")
    check.add_argument("--quiet", "-q", action="store_true", help="print only the problems")
    check.set_defaults(run=run_check)

    explain = commands.add_parser(
        "explain",
        help="print a query's algebra before and after optimisation",
        description="Print the algebra of a C-SPARQL query as S-expressions, before and after optimisation, "
        "showing which part reads which stream window and which static graph. '-' reads standard input.",
    )
    explain.add_argument("file", metavar="FILE", help="query file ('-' for standard input)")
    explain.add_argument(
        "--warehouse", metavar="DIR",
        help="use the statistics of this warehouse (default: $CSPARQL_WAREHOUSE, else delta_tables/) to split "
        "each pattern into the part that reads stream windows and the part that reads static graphs",
    )
    explain.set_defaults(run=run_explain)


def read_source(name: str) -> tuple[str, str]:
    """The text of a query file (or standard input for '-') and the name to report it under."""
    if name == "-":
        return sys.stdin.read(), "<stdin>"
    return Path(name).read_text(encoding="utf-8"), name


def _read_or_report(name: str) -> tuple[str, str] | None:
    try:
        return read_source(name)
    except FileNotFoundError:
        print(f"{name}: error: no such file", file=sys.stderr)
    except IsADirectoryError:
        print(f"{name}: error: is a directory, not a query file", file=sys.stderr)
    except UnicodeDecodeError as error:
        print(f"{name}: error: not UTF-8 text ({error.reason} at byte {error.start})", file=sys.stderr)
    except OSError as error:
        print(f"{name}: error: cannot read it ({error.strerror})", file=sys.stderr)
    return None


def run_check(args: argparse.Namespace) -> int:
    failures = 0
    for index, name in enumerate(args.files):
        source = _read_or_report(name)
        if source is None:
            failures += 1
            continue
        text, source_name = source
        try:
            query = parse_query(text, source_name)
        except QueryError as error:
            failures += 1
            print(error.render(), file=sys.stderr)
            continue
        if not args.quiet:
            if len(args.files) > 1:
                print(f"# {source_name}" if index == 0 else f"\n# {source_name}")
            sys.stdout.write(format_query(query))
    if len(args.files) > 1:
        print(f"{len(args.files) - failures} of {len(args.files)} valid", file=sys.stderr)
    return 1 if failures else 0


def run_explain(args: argparse.Namespace) -> int:
    source = _read_or_report(args.file)
    if source is None:
        return 1
    text, source_name = source
    try:
        plan = compile_query(text, source_name)
    except QueryError as error:
        print(error.render(), file=sys.stderr)
        return 1
    from csparql.storage.statistics import read_statistics
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse.locate(args.warehouse)
    statistics = read_statistics(warehouse)
    print("# algebra")
    sys.stdout.write(format_plan(plan))
    known = len(statistics.predicate_counts)
    print(f"\n# optimized (statistics of {known} source(s) from {warehouse.root})" if known else "\n# optimized (no statistics: the sources each pattern can read are not narrowed)")
    if plan.entailment:
        print(f"# under ENTAILMENT {', '.join(plan.entailment)} each pattern is matched against the entailed graph when it is "
              "compiled for Spark, and a property also counts its sub-properties' triples (docs/entailment.md)")
    sys.stdout.write(format_plan(optimize(plan, statistics)))
    return 0
