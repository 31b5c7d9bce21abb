"""The ``csparql`` command line. Each group of subcommands lives in its own module and registers itself here.

Exit codes: 0 success, 1 the input was refused (an invalid query, a bad file), 2 a usage error. A refused
input is reported in plain words with its place; no Python traceback reaches the user (``--debug`` shows one
for an internal error).
"""

from __future__ import annotations

import argparse
import sys

import importlib

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
# Each module registers its subcommands; heavy imports (Spark, Delta) stay inside the commands' functions.
COMMAND_MODULES = ("language", "ingest", "engine", "orchestration", "srbench", "maintenance")


def installed_version() -> str:
    """The version of the installed ``csparql`` distribution (its metadata), or a note that it is not installed
    (the package run from a source folder on ``PYTHONPATH``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("csparql")
    except PackageNotFoundError:
        return "(not installed: run from its source folder)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="csparql",
        description="C-SPARQL continuous queries as micro-batches on Spark over Delta tables.",
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback for internal errors")
    parser.add_argument("--version", action="version", version=f"csparql {installed_version()}",
                        help="print the installed csparql's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"csparql.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"csparql.cli.{name}":
                continue
            raise
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as error:  # the last line of defence: never a traceback for the user
        if args.debug:
            raise
        print(f"csparql: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        print("run again with --debug for the full traceback, and please report it", file=sys.stderr)
        return EXIT_INTERNAL


def entry_point() -> None:
    sys.exit(main())
