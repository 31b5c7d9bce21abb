"""The ``csparql`` command line. Each group of subcommands lives in its own module and registers itself here.

Exit codes: 0 success, 1 the input was refused (an invalid query, a bad file) or the stored data or the machine
failed (a corrupt Delta log entry, a full disk: one line naming the table or file and the cause), 2 a usage
error, 3 an internal error. A refused input is reported in plain words with its place; no Python traceback
reaches the user (``--debug`` shows one for an internal error).
"""

from __future__ import annotations

import argparse
import os
import sys

import importlib

from csparql.storage.failures import (NO_SPACE_LEFT, StorageError, causes, describe, first_line, grpc_status,
                                      no_space_left)
from csparql.storage.location import StorageUnreachable, UnsupportedLocation, s3_in_use, s3_reason

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
    if not args.debug:  # delta-rs's errors and panics would carry Rust backtraces
        os.environ["RUST_BACKTRACE"] = os.environ["RUST_LIB_BACKTRACE"] = "0"
    try:
        _check_warehouse(args)
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except BaseException as error:  # the last line of defence: never a traceback for the user
        if not isinstance(error, Exception) and type(error).__name__ != "PanicException":  # exit: Rust panics pass
            raise
        if args.debug:
            raise
        failure = failure_message(error)
        if failure is not None:
            print(f"csparql: {failure}", file=sys.stderr)
            return EXIT_REFUSED
        print(f"csparql: internal error: {type(error).__name__}: {first_line(error)}", file=sys.stderr)
        print("run again with --debug for the full traceback, and please report it", file=sys.stderr)
        return EXIT_INTERNAL


def failure_message(error: BaseException) -> str | None:
    """One line for a failure of the stored data or of the machine that no command reported itself: a
    ``StorageError`` (it names the table and the cause: a corrupt log entry, a full disk), a full disk met
    elsewhere (naming the file when the error does), a Spark Connect server that refused a request (its gRPC
    status and details) or that does not answer (its address); None for an internal error."""
    for cause in causes(error):
        if isinstance(cause, (StorageError, UnsupportedLocation, StorageUnreachable)):
            return first_line(cause)
        if isinstance(cause, OSError) and "AWS Error" in str(cause):  # pyarrow's S3 client
            return f"S3 refused or did not answer: {s3_reason(cause)}"
    if no_space_left(error):
        where = next((c.filename for c in causes(error) if isinstance(c, OSError) and c.filename), None)
        return f"{where}: {NO_SPACE_LEFT}" if where else NO_SPACE_LEFT
    if grpc_status(error) is not None:  # the Spark Connect server refused or could not be reached
        return describe(error)
    unavailable = next((c for c in causes(error) if type(c).__name__ == "SparkUnavailable"), None)
    if unavailable is not None:  # csparql.runtime.session's, not imported here: it would load pyspark
        return first_line(unavailable)
    return None


def _check_warehouse(args: argparse.Namespace) -> None:
    """For a command that works on a warehouse in S3: ``StorageUnreachable`` before it starts when the endpoint,
    the bucket or the credentials cannot be used (a local warehouse is not checked here)."""
    if not hasattr(args, "warehouse"):
        return
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse.locate(args.warehouse)
    if warehouse.remote:
        warehouse.check_reachable()


def entry_point() -> None:
    code = main()
    if s3_in_use():
        # The S3 clients' native threads (pyarrow's, delta-rs's) can abort the interpreter's shutdown once the
        # work is done; everything is committed and printed by now, so end without it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
