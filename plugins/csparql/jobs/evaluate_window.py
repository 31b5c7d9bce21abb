"""Evaluate one window of a registered query: the application ``spark-submit`` runs for a standalone cluster.

    spark-submit --master spark://host:7077 --deploy-mode client "$(python -c "from csparql.jobs import job_path; print(job_path())")" \\
        --query dags/queries/cars.rq --name cars --at 1269252600000000 --warehouse /data/delta_tables \\
        [--complete true|false] [--registry dags/queries] [--revision-horizon MICROS]

It builds the query's deployment from the registry file and runs the evaluation step every path shares
(``csparql.jobs.evaluation.evaluate_deployment_window``): it evaluates the window that closes at or before
``--at`` (µs since the epoch, or an ISO 8601 instant with a zone), replacing that window's results in the
``--name`` result tables and appending a row to the runs table (``--complete`` is recorded there), then
records the windows the evaluation finds stale (commits to its streams while it ran; for a ``REGISTER
STREAM`` query, its consumers' windows its output reaches: the registry, ``--registry``, else
``CSPARQL_REGISTRY``, says who reads it). It prints one line ``CSPARQL_RESULT {json}`` on standard output,
the stale windows included (``stale``), for the task that submitted it to announce. The SparkSession is the
one spark-submit configures, with the project's settings added (``csparql.runtime.session.submitted_session``).
``--warehouse`` is a folder or an ``s3://`` prefix; the job checks that an object store answers, with the
``AWS_*`` credentials of its environment, before it starts Spark.

Exit status: 0 on success; 2 when the arguments or the query are unusable (nothing is evaluated, no Spark is
started); 1 when the evaluation failed (the runs table records the failure). Failures print one plain
message on standard error, naming the query file, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESULT_PREFIX = "CSPARQL_RESULT "
USAGE_ERROR, EVALUATION_FAILED = 2, 1


class JobError(Exception):
    """A problem reported to the user as one message; ``status`` is the exit status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evaluate_window.py",
        description="Evaluate one window of a registered C-SPARQL query and write its results.",
    )
    parser.add_argument("--query", required=True, metavar="FILE", help="the registry .rq file")
    parser.add_argument("--name", required=True, metavar="NAME", help="the result tables' name")
    parser.add_argument("--at", required=True, metavar="MICROS",
                        help="evaluation instant: µs since the epoch (or ISO 8601 with a zone)")
    parser.add_argument("--warehouse", required=True, metavar="DIR",
                        help="the warehouse: a folder, or an s3:// prefix")
    parser.add_argument("--complete", choices=("true", "false"),
                        help="whether every input of the window had landed (recorded in the runs table)")
    parser.add_argument("--registry", metavar="DIR",
                        help="the registry folder (who reads the query's output stream); else CSPARQL_REGISTRY")
    parser.add_argument("--revision-horizon", metavar="MICROS", type=int,
                        help="how long after a window's end its staleness is revised (µs); else "
                             "CSPARQL_REVISION_HORIZON")
    return parser


def job_arguments(query: str, name: str, at: int, warehouse: str, registry: str | None = None,
                  revision_horizon: int | None = None, complete: bool | None = None) -> list[str]:
    """The arguments after the job's path that make it evaluate ``name``'s window at ``at`` (µs), exactly the
    options ``run`` parses; ``complete`` None leaves the runs table's ``complete`` unknown."""
    arguments = ["--query", str(query), "--name", name, "--at", str(at), "--warehouse", str(warehouse)]
    if registry is not None:
        arguments += ["--registry", str(registry)]
    if revision_horizon is not None:
        arguments += ["--revision-horizon", str(revision_horizon)]
    if complete is not None:
        arguments += ["--complete", "true" if complete else "false"]
    return arguments


def _instant(text: str) -> int:
    from csparql.core.windows import parse_instant

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return parse_instant(text)
    except ValueError as error:
        message = f"--at {text!r} is not an instant: give microseconds since the epoch ({error})"
        raise JobError(message, USAGE_ERROR) from None


def _compile(path: Path) -> None:
    """Check that the query file is a valid query (one message with the parser's report if not). It is
    compiled once: the deployment built next takes the plan from the registry's compilation of this content."""
    from csparql.deploy.file_settings import FileSettings
    from csparql.deploy.registry import RegistrationError, compiled_text, read_registry_file

    path = path.resolve()
    try:
        text, digest = read_registry_file(path)
    except RegistrationError as error:
        raise JobError(f"the query file {error}", USAGE_ERROR) from None
    try:
        FileSettings.of(path, text)
    except RegistrationError as error:
        raise JobError(str(error), USAGE_ERROR) from None
    try:
        compiled_text(path, text, digest)
    except RegistrationError as error:
        # The parser's report (position, source line, caret) follows, indented under the one-line summary.
        detail = "\n".join(f"    {line}" for line in error.message.strip("\n").splitlines())
        message = f"the query file {path} is not a valid C-SPARQL query, so nothing was evaluated:\n{detail}"
        raise JobError(message, USAGE_ERROR) from None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:2000] or type(error).__name__


def run(argv: list[str] | None = None) -> dict:
    """Evaluate the window the arguments name; the CSPARQL_RESULT record, or ``JobError``."""
    args = _parser().parse_args(argv)
    from csparql.storage.warehouse import InvalidName, check_query_name
    from csparql.core.windows import format_instant

    at = _instant(args.at)
    try:
        name = check_query_name(args.name)
    except InvalidName as error:
        raise JobError(f"--name: {error}", USAGE_ERROR) from None
    query = Path(args.query)
    _compile(query)
    _check_warehouse(args.warehouse, query)
    settings = _settings(args, query)
    deployment = _deployment(query, name, settings)
    warehouse = settings.warehouse
    complete = None if args.complete is None else args.complete == "true"

    # Spark only now: a bad query or argument fails fast, without a JVM.
    from pyspark.sql import SparkSession

    from csparql.engine.runner import Engine, EvaluationFailed
    from csparql.jobs.evaluation import evaluate_deployment_window
    from csparql.runtime.session import submitted_session

    started_here = SparkSession.getActiveSession() is None
    try:
        spark = submitted_session(app_name=f"csparql-{name}")
        evaluated = evaluate_deployment_window(Engine(warehouse, spark), deployment, settings, at, complete)
    except EvaluationFailed as error:
        message = f"{query}: {_one_line(error)} (the runs table of {warehouse.root} records it)"
        raise JobError(message, EVALUATION_FAILED) from None
    except Exception as error:  # Spark or storage failed around the evaluation: one message, no traceback
        message = f"{query}: the evaluation as {name} at {format_instant(at)} failed: {type(error).__name__}: "
        raise JobError(message + _one_line(error), EVALUATION_FAILED) from None
    finally:
        if started_here:
            active = SparkSession.getActiveSession()
            if active is not None:
                active.stop()
    evaluation = evaluated.evaluation
    window = evaluation.window
    if window.start is not None:
        span = f"({format_instant(window.start)}, {format_instant(window.end)}]"
    else:
        span = f"ending {format_instant(window.end)}"
    return {
        **evaluated.record(),
        "file": str(query),
        "at": at,
        "window": span,
        "form": evaluation.result.form,
        "results": len(evaluation.result),
    }


def _check_warehouse(text: str, query: Path) -> None:
    """Nothing when ``text`` names a warehouse the job can use: a local folder, or an S3 prefix whose store
    answers with the credentials the job was given; otherwise ``JobError`` saying which."""
    from csparql.storage.location import StorageUnreachable, UnsupportedLocation, check_reachable, location

    try:
        root = location(text)
    except UnsupportedLocation as error:
        raise JobError(f"{query}: --warehouse: {error}", USAGE_ERROR) from None
    if isinstance(root, Path):
        if not root.is_dir():
            message = f"{query}: the warehouse {text} is not a folder, so nothing was evaluated"
            raise JobError(message, USAGE_ERROR)
        return
    try:
        check_reachable(root)
    except StorageUnreachable as error:
        raise JobError(f"{query}: {error}, so nothing was evaluated", USAGE_ERROR) from None


def _settings(args: argparse.Namespace, query: Path):
    """The deployment settings of the job: ``CSPARQL_*`` with the warehouse, registry and horizon given."""
    import dataclasses

    from csparql.deploy.settings import Settings
    from csparql.storage.warehouse import Warehouse

    try:
        settings = Settings.from_environment()
    except ValueError as error:
        raise JobError(f"{query}: {error}", USAGE_ERROR) from None
    changes = {"warehouse": Warehouse(args.warehouse)}
    if args.registry is not None:
        changes["registry"] = Path(args.registry).resolve()
    if args.revision_horizon is not None:
        changes["revision_horizon"] = args.revision_horizon
    return dataclasses.replace(settings, **changes)


def _deployment(query: Path, name: str, settings):
    """The deployment of the query file as ``name`` (as the task that submitted the job built it)."""
    from csparql.deploy.plan import deployment_of_query
    from csparql.deploy.registry import RegistrationError

    try:
        return deployment_of_query(query.resolve(), settings, None if query.stem == name else name)
    except RegistrationError as error:
        raise JobError(" ".join(str(error).split()), USAGE_ERROR) from None


def main(argv: list[str] | None = None) -> int:
    try:
        record = run(argv)
    except SystemExit as exit_:  # argparse: --help, or a usage message already printed
        return exit_.code if isinstance(exit_.code, int) else USAGE_ERROR
    except JobError as error:
        print(f"evaluate_window: {error}", file=sys.stderr, flush=True)
        return error.status
    print(RESULT_PREFIX + json.dumps(record, ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
