"""``csparql run``, ``replay``, ``results`` and ``sql``: evaluating windows and reading what they wrote.

Spark and Delta are imported inside the commands, so ``csparql check`` stays quick.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from csparql.cli.language import _read_or_report, add_dialect_option
from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from csparql.core.panes import AUTO

FORMATS = ("json", "tsv", "csv")


def _common(parser: argparse.ArgumentParser, spark: bool = True) -> None:
    parser.add_argument("--warehouse", metavar="DIR", help="warehouse folder (default: $CSPARQL_WAREHOUSE, else delta_tables/)")
    if spark:
        parser.add_argument("--master", metavar="URL", help="Spark master: local[*], spark://host:7077 or sc://host:15002 (default: $CSPARQL_SPARK_MASTER, else $SPARK_REMOTE, else local[*])")


def register(commands) -> None:
    _add_run_command(commands)
    _add_replay_command(commands)
    _add_results_command(commands)
    _add_sql_command(commands)
    _add_demo_command(commands)


def _add_run_command(commands) -> None:
    run = commands.add_parser(
        "run",
        help="evaluate one window of a query, write and print its results",
        description="Evaluate the window of QUERY that closes at or before --at, replace that "
        "window's results in the query's result table, record the run, and print the results.",
    )
    run.add_argument("query", metavar="QUERY", help="query file ('-' for standard input)")
    run.add_argument("--at", required=True, metavar="T", help="evaluation instant: ISO 8601 with a zone (2010-03-22T10:10:00Z) or epoch milliseconds")
    run.add_argument("--format", choices=FORMATS, default="tsv", help="output format (default tsv; graphs print as N-Triples)")
    run.add_argument("--name", help="result table name for a query without REGISTER (default: the file name); refused "
                     "when SQL would confuse it with a warehouse table or another query's results (see `csparql sql`)")
    run.add_argument("--no-write", action="store_true", help="print the results without writing them")
    _panes_option(run)
    _common(run)
    add_dialect_option(run)
    run.set_defaults(run=run_run)


def _add_replay_command(commands) -> None:
    replay = commands.add_parser(
        "replay",
        help="evaluate every scheduled window in a range",
        description="Evaluate every scheduled evaluation of QUERY with its instant in [--from, --to] (the "
        "windows a backfill over that range would evaluate), writing each window's results.",
    )
    replay.add_argument("query", metavar="QUERY", help="query file ('-' for standard input)")
    replay.add_argument("--from", dest="start", required=True, metavar="T1", help="first evaluation instant")
    replay.add_argument("--to", dest="end", required=True, metavar="T2", help="last evaluation instant")
    replay.add_argument("--format", choices=FORMATS, default=None,
                        help="json: one JSON object per line per window; csv or tsv: one table of every window's "
                        "results, with window_start and window_end columns (default: a line per window saying how "
                        "many results it wrote)")
    replay.add_argument("--name", help="result table name for a query without REGISTER (default: the file name); "
                        "refused as for run")
    _panes_option(replay)
    _common(replay)
    add_dialect_option(replay)
    replay.set_defaults(run=run_replay)


def _add_results_command(commands) -> None:
    results = commands.add_parser(
        "results",
        help="print the stored results of a query",
        description="Read the results a query's evaluations stored, window by window.",
    )
    results.add_argument("name", metavar="NAME", help="the query's name")
    results.add_argument("--format", choices=(*FORMATS, "trig"), default="tsv",
                         help="tsv (default) or csv: one table of every window's results, with window_start and "
                         "window_end columns; json: one JSON object per line per window; trig (the graphs of "
                         "CONSTRUCT and DESCRIBE queries): a named graph per window, "
                         "timestamped with the window's end, which csparql ingest lands as a stream")
    results.add_argument("--from", dest="start", metavar="T1", help="only windows ending at or after T1")
    results.add_argument("--to", dest="end", metavar="T2", help="only windows ending at or before T2")
    results.add_argument("--revision", type=int, metavar="N", help="each window as its revision N wrote it (0: its "
                         "first evaluation), read by Delta time travel; default: the current results")
    _common(results, spark=False)
    results.set_defaults(run=run_results)


def _add_sql_command(commands) -> None:
    sql = commands.add_parser(
        "sql",
        help="run SQL over the result, stream and run tables (no Spark)",
        description="Run a SQL query with DataFusion over the warehouse's Delta tables. Table names "
        "are in lower case: each query's results by its name (name, name_answers, name_triples), runs, "
        "statistics, stale_windows, each stream as stream_<name> and each static graph as static_<name> (see "
        "--tables); query names that would collide in lower case, or take a name kept for the warehouse or SQL, are refused when "
        "results are written. "
        "Read-only: SELECT, WITH, VALUES, SHOW, DESCRIBE and EXPLAIN (of a query) run; DataFusion refuses "
        "statements that write, read other files or change the session (COPY, INSERT, CREATE, DROP, SET, ...).",
    )
    sql.add_argument("statement", nargs="?", metavar="SQL", help="the SQL query")
    sql.add_argument("--tables", action="store_true", help="list the table names available to SQL")
    sql.add_argument("--format", choices=("table", "csv", "tsv", "json"), default="table", help="output format")
    _common(sql, spark=False)
    sql.set_defaults(run=run_sql)


def _add_demo_command(commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="ingest sample data and replay the example queries",
        description="Write sample streams and static graphs, ingest them into a fresh demo warehouse, replay the "
        "last windows of every example query, and print their results.",
    )
    demo.add_argument("--warehouse", metavar="DIR", help="the demo warehouse, recreated on each run (default: delta_tables/demo)")
    demo.add_argument("--master", metavar="URL", help="Spark master (default: $CSPARQL_SPARK_MASTER, else $SPARK_REMOTE, else local[*])")
    demo.add_argument("--stream-format", choices=("tnq", "trig", "nq", "jsonld"), default="tnq",
                      help="the format the sample streams are written and ingested in (as csparql samples --format)")
    demo.set_defaults(run=run_demo)


# --- helpers ---------------------------------------------------------------------------------------------


def _instant(text: str, option: str) -> int | None:
    """The instant an option gives, or None after a one-line message naming the option (a malformed instant, or
    one outside the instants csparql evaluates)."""
    from csparql.core.windows import parse_evaluation_instant

    try:
        return parse_evaluation_instant(text)
    except ValueError as error:
        print(f"csparql: {option}: {error}", file=sys.stderr)
        return None


def _instant_text(instant: int | None) -> str | None:
    """An instant as ISO 8601 (None stays None: a window without a start)."""
    from csparql.core.windows import format_instant

    return None if instant is None else format_instant(instant)


def _panes_option(parser: argparse.ArgumentParser) -> None:
    from csparql.core.panes import PANE_MODES

    parser.add_argument("--panes", choices=PANE_MODES, default=None,
                        help="how windows are computed from panes: auto (where that is expected to cost less), "
                        "always (whenever the query allows it) or off (every window recomputed); default: the "
                        "file's '# csparql panes' line, else auto. `csparql explain` says what each does")


def _load(query: str, dialect: str | None = None):
    """(plan, source name, version of the text, the pane mode its ``# csparql panes`` line gives or None, the
    text) or None after reporting the problem; ``dialect`` as ``--dialect`` gives it (None: told from the
    text)."""
    source = _read_or_report(query)
    if source is None:
        return None
    text, source_name = source
    try:
        plan = compile_query(text, source_name, dialect)
    except QueryError as error:
        print(error.render(), file=sys.stderr)
        return None
    from csparql.deploy.history import text_version
    from csparql.deploy.file_settings import FileSettings
    from csparql.deploy.registry import RegistrationError

    try:
        panes = FileSettings.of(Path(source_name), text).panes
    except RegistrationError as error:
        print(f"csparql: {error}", file=sys.stderr)
        return None
    text = text.replace("\r\n", "\n")
    return plan, source_name, text_version(text), panes, text


def _name(plan, source_name: str, args: argparse.Namespace, write: bool = True, text: str | None = None):
    """The name the results are written under (``--name``, else the REGISTER name, else the file's) and, when
    writing, the text's ``TextOwner``; or None after saying why it cannot be: not a valid name, or (when
    writing) one whose SQL tables would collide with the warehouse's own or with another query's stored
    results, or whose result tables hold the results of another query text (one that is not an earlier
    version of the query registered under that name)."""
    from csparql.storage.failures import StorageError
    from csparql.storage.results import QueryTextCollision, ResultTable
    from csparql.storage.warehouse import InvalidName, Warehouse, check_query_name, default_query_name

    name = args.name or (plan.registration.name if plan.registration else default_query_name(source_name))
    try:
        if not write:
            return check_query_name(name), None
        warehouse = Warehouse.locate(args.warehouse)
        warehouse.check_new_results(name)
        owner = _owner(text, name)
        if owner is not None:
            try:
                ResultTable.check_owner(warehouse, plan, name, owner)
            except StorageError:  # a table that cannot be read: the evaluation fails on it and records its run
                pass
        return name, owner
    except (InvalidName, QueryTextCollision) as error:
        print(f"csparql: {error}", file=sys.stderr)
        return None


def _owner(text: str | None, name: str):
    """The ``TextOwner`` of ``text`` written as ``name``: the versions of the query registered under that
    name in this command line's registry (``csparql settings``) are its own."""
    if text is None:
        return None
    from csparql.deploy.history import text_owner
    from csparql.deploy.settings import Settings

    try:
        settings = Settings.from_environment()
    except ValueError:  # a CSPARQL_* variable that cannot be used: no registry to ask
        settings = None
    return text_owner(text, name, settings)


def _engine(args):
    from csparql.engine.runner import Engine
    from csparql.storage.warehouse import Warehouse

    return Engine(Warehouse.locate(args.warehouse), master=getattr(args, "master", None))


def _window_json(evaluation) -> str:
    from csparql.storage.formats import to_json_object, to_ntriples
    from csparql.core.windows import format_instant

    window = evaluation.window
    if evaluation.result.form in ("select", "ask"):
        results = to_json_object(evaluation.result)
    else:
        results = {"graph": to_ntriples(evaluation.result)}
    return json.dumps(
        {
            "window_start": format_instant(window.start) if window.start is not None else None,
            "window_end": format_instant(window.end),
            "results": results,
        },
        ensure_ascii=False,
    )


def _engine_errors():
    from csparql.engine.runner import EvaluationFailed
    from csparql.storage.delta import StorageError, TableFeatureError

    return (EvaluationFailed, StorageError, TableFeatureError)


# --- commands --------------------------------------------------------------------------------------------


def run_run(args: argparse.Namespace) -> int:
    loaded = _load(args.query, args.dialect)
    at = _instant(args.at, "--at")
    if loaded is None or at is None:
        return 1
    plan, source_name, version, panes, text = loaded
    named = _name(plan, source_name, args, write=not args.no_write, text=text)
    if named is None:
        return 1
    name, owner = named
    from csparql.storage.formats import render

    try:
        evaluation = _engine(args).evaluate(plan, at, name, write=not args.no_write, version=version,
                                            panes=args.panes or panes or AUTO, owner=owner)
    except _engine_errors() as error:
        print(f"csparql: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(render(evaluation.result, args.format))
    from csparql.core.windows import format_instant

    window = evaluation.window
    span = f"({format_instant(window.start)}, {format_instant(window.end)}]" if window.start is not None else f"ending {format_instant(window.end)}"
    where = "" if args.no_write else f", written to the results of {name}"
    print(f"{name}: window {span}: {len(evaluation.result)} result(s){where} in {evaluation.duration_ms} ms", file=sys.stderr)
    return 0


def run_replay(args: argparse.Namespace) -> int:
    loaded = _load(args.query, args.dialect)
    start, end = _instant(args.start, "--from"), _instant(args.end, "--to")
    if loaded is None or start is None or end is None:
        return 1
    if start > end:
        print("csparql: --from must not be after --to", file=sys.stderr)
        return 1
    plan, source_name, version, panes, text = loaded
    named = _name(plan, source_name, args, text=text)
    if named is None:
        return 1
    name, owner = named
    from tqdm import tqdm

    from csparql.storage.formats import ColumnsDiffer, WindowedTable
    from csparql.core.schedule import scheduled_evaluations
    from csparql.core.windows import format_instant

    try:
        windows = scheduled_evaluations(plan, start, end)
    except ValueError as error:
        print(f"csparql: {error}", file=sys.stderr)
        return 1
    engine = _engine(args)
    evaluations = engine.replay(plan, start, end, name, version=version, panes=args.panes or panes or AUTO,
                                owner=owner)
    progress = tqdm(evaluations, total=len(windows), desc=name, unit="window", file=sys.stderr,
                    disable=not sys.stderr.isatty())
    table = WindowedTable(args.format) if args.format in ("csv", "tsv") else None
    try:
        for evaluation in progress:
            window = evaluation.window
            if args.format == "json":
                print(_window_json(evaluation), flush=True)
            elif table is not None:
                sys.stdout.write(table.rows(_instant_text(window.start), format_instant(window.end), evaluation.result))
                sys.stdout.flush()
            else:
                print(f"{format_instant(window.end)}\t{len(evaluation.result)} result(s)\t{evaluation.duration_ms} ms", flush=True)
    except (*_engine_errors(), ColumnsDiffer) as error:
        print(f"csparql: {error}", file=sys.stderr)
        return 1
    print(f"{name}: {len(windows)} window(s) evaluated", file=sys.stderr)
    return 0


def run_results(args: argparse.Namespace) -> int:
    from csparql.storage.formats import ColumnsDiffer, NotAGraph, TimestampedGraphs, WindowedTable
    from csparql.storage.stored import StoredResults
    from csparql.storage.warehouse import InvalidName, Warehouse
    from csparql.core.windows import format_instant

    start = _instant(args.start, "--from") if args.start else None
    end = _instant(args.end, "--to") if args.end else None
    if (args.start and start is None) or (args.end and end is None):
        return 1
    try:
        stored = StoredResults(Warehouse.locate(args.warehouse), args.name)
    except (InvalidName, LookupError) as error:
        print(f"csparql: {error}", file=sys.stderr)
        return 1
    count = 0
    if args.revision is not None and args.revision < 0:
        print(f"csparql: --revision {args.revision}: a revision is 0 (the first evaluation) or more", file=sys.stderr)
        return 1
    table = None if args.format in ("json", "trig") else WindowedTable(args.format)
    graphs = TimestampedGraphs(args.name) if args.format == "trig" else None
    for window_start, window_end, result in stored.windows(start, end, revision=args.revision):
        count += 1
        if graphs is not None:
            try:
                sys.stdout.write(graphs.window(format_instant(window_end), result))
            except NotAGraph as error:
                print(f"csparql: {args.name}: {error}", file=sys.stderr)
                return 1
        elif args.format == "json":
            from csparql.storage.formats import to_json_object, to_ntriples

            body = to_json_object(result) if result.form in ("select", "ask") else {"graph": to_ntriples(result)}
            print(json.dumps({"window_start": format_instant(window_start) if window_start is not None else None,
                              "window_end": format_instant(window_end), "results": body}, ensure_ascii=False))
        else:
            try:
                sys.stdout.write(table.rows(_instant_text(window_start), format_instant(window_end), result))
            except ColumnsDiffer as error:
                print(f"csparql: {args.name}: {error}", file=sys.stderr)
                return 1
    if count == 0:
        shown = f" with a revision {args.revision}" if args.revision is not None else ""
        print(f"{args.name}: no stored windows{shown} in that range", file=sys.stderr)
    return 0


def run_sql(args: argparse.Namespace) -> int:
    from csparql.storage.stored import SqlError, read_only_sql, sql_tables
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse.locate(args.warehouse)
    if args.tables or not args.statement:
        tables = sql_tables(warehouse)
        if not tables:
            print(f"no tables in {warehouse.root}", file=sys.stderr)
        for name, path in sorted(tables.items()):
            print(f"{name}\t{path}")
        return 0 if args.tables else 2
    try:
        table = read_only_sql(warehouse, args.statement)
    except SqlError as error:
        print(f"csparql sql: {error}", file=sys.stderr)
        return 1
    _print_table(table, args.format)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from csparql.demo import run_demo as demo

    root = Path(args.warehouse) if args.warehouse else Path.cwd() / "delta_tables" / "demo"
    return demo(root.resolve(), master=args.master, stream_format=args.stream_format)


def _print_table(table, fmt: str) -> None:
    import csv

    rows = table.to_pylist()
    names = table.column_names
    if fmt == "json":
        for row in rows:
            print(json.dumps(row, default=str, ensure_ascii=False))
        return
    if fmt in ("csv", "tsv"):
        writer = csv.writer(sys.stdout, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow(["" if row[n] is None else row[n] for n in names])
        return
    cells = [[("" if row[n] is None else str(row[n])) for n in names] for row in rows]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths)))
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=sys.stderr)
