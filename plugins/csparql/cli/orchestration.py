"""``csparql register``, ``unregister``, ``watermark``, ``settings``, ``stack`` and ``connect-server``: queries
as Airflow DAGs.

``register`` checks a query and puts it in the registry (``$CSPARQL_REGISTRY``, default ``dags/queries/``)
with its DAG loader; Airflow's DAG processor picks it up within seconds. ``stack`` runs the embedded Airflow
and its Spark Connect server (the README's main command); ``connect-server`` runs that server alone, for an
Airflow of one's own, and prints the connection that reaches it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from csparql.cli.language import add_dialect_option

EXIT_OK, EXIT_REFUSED = 0, 1


def register(commands) -> None:
    _add_register_command(commands)
    _add_unregister_command(commands)
    _add_watermark_command(commands)
    _add_settings_command(commands)
    _add_stack_command(commands)
    _add_connect_server_command(commands)


def _add_register_command(commands) -> None:
    reg = commands.add_parser(
        "register",
        help="register a query: it becomes an Airflow DAG evaluated on its schedule",
        description="Check QUERY and copy it into the registry as NAME.rq (NAME: --as, else its REGISTER name, "
        "else the file name) with the DAG loader Airflow reads. A query that does not parse or cannot be "
        "deployed is refused and the registry is left unchanged. --sync writes missing loaders, removes "
        "those whose query file is gone and, after a query file was edited by hand, has Airflow parse every "
        "loader again at once (their modification time set to now).",
    )
    reg.add_argument("query", nargs="?", metavar="QUERY", help="the query file")
    reg.add_argument("--as", dest="name", metavar="NAME", help="the registration name (DAG id and result tables)")
    reg.add_argument("--replace", action="store_true", help="replace a different query registered under NAME")
    reg.add_argument("--sync", action="store_true", help="bring the loaders in line with the registry's .rq files")
    _warehouse_option(reg, "the warehouse whose tables the query's result names are checked against and where its "
                      "versions are kept; Airflow's tasks evaluate into the warehouse of their own environment")
    add_dialect_option(reg)
    reg.set_defaults(run=run_register)


def _add_unregister_command(commands) -> None:
    unreg = commands.add_parser("unregister", help="remove a query from the registry (its results stay)")
    unreg.add_argument("name", metavar="NAME")
    _warehouse_option(unreg, "the warehouse whose version history records the removal")
    unreg.set_defaults(run=run_unregister)


def _add_watermark_command(commands) -> None:
    mark = commands.add_parser(
        "watermark",
        help="show stream watermarks, or advance one",
        description="Without arguments, print every stream's watermark: triples with a timestamp up to it are "
        "known to have landed. With STREAM and T, advance that stream's watermark to T, e.g. to let windows of a "
        "quiet stream be evaluated as complete. STREAM must be an IRI the warehouse knows (ingested, or with a "
        "watermark) unless --create is given. A T later than the clock plus $CSPARQL_MAX_FUTURE_SKEW (default 1h) "
        "is refused unless --allow-future is given. A watermark never goes back: a T at or before the current "
        "one changes nothing, which is said on standard error, and the exit status is 0 (the stream's watermark "
        "is at T or later, as asked). Exit status 1: refused, nothing recorded.",
    )
    mark.add_argument("stream", nargs="?", metavar="STREAM", help="the stream IRI")
    mark.add_argument("instant", nargs="?", metavar="T", help="ISO 8601 instant with a zone, or epoch milliseconds")
    mark.add_argument("--warehouse", metavar="DIR", help="warehouse folder (default: $CSPARQL_WAREHOUSE, else delta_tables/)")
    mark.add_argument("--allow-future", action="store_true",
                      help="advance it even to a T further in the future than $CSPARQL_MAX_FUTURE_SKEW: every window "
                      "of the stream up to T then counts as complete, and the watermark never goes back")
    mark.add_argument("--create", action="store_true",
                      help="give STREAM its first watermark even though nothing was ingested into it yet")
    mark.set_defaults(run=run_watermark)


def _add_settings_command(commands) -> None:
    shown = commands.add_parser(
        "settings",
        help="show the deployment settings this command line uses, and where each comes from",
        description="Print each setting (the options of Airflow's [csparql] section) as the command line reads "
        "it: its CSPARQL_* environment variable, else its default, with folder defaults under the working "
        "directory. Airflow's components read the [csparql] section instead (AIRFLOW__CSPARQL__*, airflow.cfg), "
        "with folder defaults under AIRFLOW_HOME: `airflow config list --section csparql --show-values`.",
    )
    shown.set_defaults(run=run_settings)


def _add_stack_command(commands) -> None:
    stack = commands.add_parser(
        "stack",
        help="run the embedded Airflow and Spark with the example queries (Ctrl-C stops it)",
        description="Start one Spark Connect server and Airflow (api-server, scheduler, DAG processor, triggerer) "
        "on 127.0.0.1 with SQLite; register the example queries and print the address and login as soon as "
        "Airflow answers; then land the sample streams through their ingestion DAGs, backfill each query's last "
        "sample windows, play the sample streams live (events timestamped now), and report the progress. Evaluations and ingests run on the Connect server (--spark "
        "local: each task starts a Spark of its own). Every process that exits is started again. Ctrl-C stops "
        "everything.",
    )
    stack.add_argument("--port", type=int, default=8080, help="the UI and API port (default 8080)")
    stack.add_argument("--spark", choices=("connect", "local"), default=None,
                       help="where evaluations and ingests run: the stack's Spark Connect server (connect, the "
                       "default unless CSPARQL_SPARK=local) or a local Spark inside each task (local)")
    stack.add_argument("--connect-port", type=int, default=None, metavar="PORT",
                       help="the Spark Connect server's port on 127.0.0.1 (default 15002)")
    stack.add_argument("--home", metavar="DIR", help="AIRFLOW_HOME (default: .airflow/ in the working directory)")
    stack.add_argument("--windows", type=int, default=3, help="sample windows backfilled per query (default 3)")
    stack.add_argument("--examples", nargs="*", metavar="NN", help="only these example numbers (default: all)")
    stack.add_argument("--live-every", type=float, default=30, metavar="SECONDS",
                       help="once the sample history has landed, land a file of sample events timestamped now "
                       "in each sample stream every SECONDS (default 30; 0: no live events)")
    _warehouse_option(stack, "the warehouse the stack's tasks read and write")
    stack.set_defaults(run=run_stack)


def _add_connect_server_command(commands) -> None:
    server = commands.add_parser(
        "connect-server",
        help="run a Spark Connect server on 127.0.0.1 for an Airflow of your own (Ctrl-C stops it)",
        description="Start the Spark Connect server csparql's stack runs, on 127.0.0.1, and print its client "
        "URL and the `airflow connections add` command that lets an Airflow on this machine use it (its token "
        "as the connection's password). Clients must see the warehouse at the same paths as the server. A session "
        "nobody uses is closed after $CSPARQL_CONNECT_SESSION_TIMEOUT (default 10m); csparql's clients open a new "
        "one by themselves. Ctrl-C stops it.",
    )
    server.add_argument("--port", type=int, default=None, metavar="PORT",
                        help="the port on 127.0.0.1 (default 15002)")
    server.add_argument("--master", default=None, metavar="MASTER", help="the server's Spark master (default local[2])")
    server.add_argument("--memory", default=None, metavar="SIZE",
                        help="the driver's memory (default: $CSPARQL_DRIVER_MEMORY, else 2g)")
    server.add_argument("--work", default=".spark-connect", metavar="DIR",
                        help="the server's folder: its configuration and log (default .spark-connect/)")
    server.add_argument("--conn-id", default="csparql_spark", metavar="ID",
                        help="the connection id the printed `airflow connections add` creates (default csparql_spark)")
    server.set_defaults(run=run_connect_server)


def _warehouse_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--warehouse", metavar="DIR", help=f"{what}: a folder or s3://bucket/prefix (default: "
                        "$CSPARQL_WAREHOUSE, else delta_tables/)")


def _settings(warehouse: str | None = None):
    """The deployment settings of the environment, with ``--warehouse`` (when given) as the warehouse (and its
    ``landing/`` as the landing folder unless ``CSPARQL_LANDING`` says otherwise); None after saying what is
    wrong with a setting."""
    from csparql.deploy.settings import Settings

    environment = dict(os.environ)
    if warehouse:
        environment["CSPARQL_WAREHOUSE"] = warehouse if "://" in warehouse else str(Path(warehouse).resolve())
    try:
        return Settings.from_environment(environment)
    except ValueError as error:
        print(f"csparql: {error}", file=sys.stderr)
        return None


def run_settings(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings is None:
        return EXIT_REFUSED
    for line in settings.describe():
        print(line)
    return EXIT_OK


def run_register(args: argparse.Namespace) -> int:
    from csparql.deploy.registration import register
    from csparql.deploy.registry import RegistrationError, sync_loaders

    settings = _settings(args.warehouse)
    if settings is None:
        return EXIT_REFUSED
    if args.sync:
        written, removed = sync_loaders(settings)
        for path in written:
            print(f"wrote {path}")
        for path in removed:
            print(f"removed {path} (its query is gone)")
        if not args.query:
            return EXIT_OK
    if not args.query:
        print("csparql register: give a QUERY file, or --sync", file=sys.stderr)
        return 2
    if args.dialect is not None and not _is_in_dialect(args.query, args.dialect):
        return EXIT_REFUSED
    try:
        target = register(args.query, settings, name=args.name, replace=args.replace)
    except RegistrationError as error:
        print(f"csparql: refused: {error}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"registered {target.stem}: {target} (DAG '{target.stem}', loader {target.with_suffix('.py').name})")
    print(f"its DAG starts paused, as every new DAG does on the embedded stack (Airflow's default; docker-compose "
          f"sets AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False): unpause it with the toggle on its page or with "
          f"`airflow dags unpause {target.stem}`")
    return EXIT_OK


def _is_in_dialect(path: str, dialect: str) -> bool:
    """Whether the query file is a valid query of ``dialect`` (reporting why not). The registry reads a query
    in the dialect its text is written in, which is this one whenever the query is valid in it."""
    from csparql.cli.language import _read_or_report
    from csparql.core.frontend import compile_query
    from csparql.core.language.errors import QueryError

    source = _read_or_report(path)
    if source is None:
        return False
    text, source_name = source
    try:
        compile_query(text, source_name, dialect)
    except QueryError as error:
        print(error.render(), file=sys.stderr)
        return False
    return True


def run_unregister(args: argparse.Namespace) -> int:
    from csparql.deploy.registration import unregister
    from csparql.deploy.registry import RegistrationError

    settings = _settings(args.warehouse)
    if settings is None:
        return EXIT_REFUSED
    try:
        removed = unregister(args.name, settings)
    except RegistrationError as error:
        print(f"csparql: {error}", file=sys.stderr)
        return EXIT_REFUSED
    print("removed " + ", ".join(str(p) for p in removed) + f"; the results of {args.name} stay in the warehouse")
    return EXIT_OK


def run_watermark(args: argparse.Namespace) -> int:
    from csparql.deploy.settings import max_future_skew_setting
    from csparql.storage.warehouse import Warehouse
    from csparql.storage.watermarks import future_bound, read_watermarks, set_watermark
    from csparql.core.windows import format_duration, format_instant, parse_evaluation_instant

    warehouse = Warehouse.locate(args.warehouse)
    if args.stream and args.instant:
        try:
            instant = parse_evaluation_instant(args.instant)
        except ValueError as error:
            print(f"csparql: T: {error}", file=sys.stderr)
            return EXIT_REFUSED
        try:
            skew = max_future_skew_setting()
        except ValueError as error:
            print(f"csparql watermark: {error}", file=sys.stderr)
            return EXIT_REFUSED
        bound = future_bound(skew)
        if instant > bound and not args.allow_future:
            print(f"csparql watermark: refused: {format_instant(instant)} is later than {format_instant(bound)}, "
                  f"the clock plus the maximum future skew of {format_duration(skew)} (CSPARQL_MAX_FUTURE_SKEW); "
                  "a watermark never goes back, so pass --allow-future if you mean it", file=sys.stderr)
            return EXIT_REFUSED
        try:
            change = set_watermark(warehouse, args.stream, instant, "csparql watermark", create=args.create)
        except ValueError as error:  # WatermarkRefused, or an instant outside the instants csparql evaluates
            print(f"csparql watermark: refused: {error}", file=sys.stderr)
            return EXIT_REFUSED
        if not change.advanced:
            if change.before == instant:
                why = f"is already {format_instant(instant)}"
            else:
                why = (f"stays at {format_instant(change.before)}: {format_instant(instant)} is earlier, and a "
                       "watermark never goes back")
            print(f"csparql watermark: unchanged: the watermark of <{change.stream}> {why}", file=sys.stderr)
    elif args.stream:
        print("csparql watermark: give T to advance the stream's watermark", file=sys.stderr)
        return 2
    marks = read_watermarks(warehouse)
    if not marks:
        print("no stream has a watermark yet (ingest advances it)")
    for stream, mark in sorted(marks.items()):
        print(f"{format_instant(mark)}\t<{stream}>")
    return EXIT_OK


def run_stack(args: argparse.Namespace) -> int:
    from csparql.stack.airflow_stack import StackError
    from csparql.stack.embedded import EmbeddedStack

    settings = _settings(args.warehouse)
    if settings is None:
        return EXIT_REFUSED
    spark = args.spark or os.environ.get("CSPARQL_SPARK") or "connect"
    if spark == "standalone":
        print("csparql stack: CSPARQL_SPARK=standalone: the embedded stack has no cluster; it runs Spark on its own "
              "Connect server (--spark connect) or inside each task (--spark local)", file=sys.stderr)
        return EXIT_REFUSED
    for name, port in (("--port", args.port), ("--connect-port", args.connect_port)):
        if port is not None and not 0 < port < 65536:
            print(f"csparql stack: {name} {port}: a port is a number from 1 to 65535", file=sys.stderr)
            return 2
    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    embedded = EmbeddedStack(settings, port=args.port, home=Path(args.home) if args.home else None,
                             windows=args.windows, examples=args.examples, spark=spark, connect_port=args.connect_port,
                             live_every=max(args.live_every, 0))
    try:
        embedded.run(stopping)
    except StackError as error:
        print(f"csparql stack: {error}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        print("stopping Airflow and Spark …", file=sys.stderr)
        embedded.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        print("stopped", file=sys.stderr)
    return EXIT_OK


def run_connect_server(args: argparse.Namespace) -> int:
    """Run a Spark Connect server in the foreground until Ctrl-C; print how clients reach it."""
    from csparql.runtime.connect_server import (DEFAULT_MASTER, DEFAULT_PORT, ConnectServer, ConnectServerError,
                                             port_in_use)

    port = args.port or DEFAULT_PORT
    if not 0 < port < 65536:
        print(f"csparql connect-server: --port {port}: a port is a number from 1 to 65535", file=sys.stderr)
        return 2
    if port_in_use(port):
        print(f"csparql connect-server: port {port} is in use (another Spark Connect server?): pass --port to use "
              "another one", file=sys.stderr)
        return EXIT_REFUSED
    from csparql.deploy.settings import Settings

    try:
        session_timeout = Settings.from_environment().connect_session_timeout / 1e6
    except ValueError as error:
        print(f"csparql connect-server: {error}", file=sys.stderr)
        return EXIT_REFUSED
    work = Path(args.work).resolve()
    server = ConnectServer(work, port=port, master=args.master or DEFAULT_MASTER, memory=args.memory,
                           log=work / "spark-connect.log", session_timeout=session_timeout)
    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        print(f"starting the Spark Connect server on {server.address} ({server.master}, driver memory "
              f"{server.memory}; log in {server.log}) …", file=sys.stderr)
        server.wait_until_answering()
        print("\n".join([
            f"the Spark Connect server answers on {server.address}",
            f"  its client URL (for csparql commands: export CSPARQL_SPARK_MASTER='{server.url}')",
            "  an Airflow on this machine uses it through a connection, the token as its password:",
            f"    airflow connections add {args.conn_id} --conn-type spark_connect --conn-host localhost "
            f"--conn-port {server.port} --conn-password '{server.token}'",
            f"    export AIRFLOW__CSPARQL__SPARK=connect AIRFLOW__CSPARQL__SPARK_CONN_ID={args.conn_id}",
            "Ctrl-C stops the server.",
        ]), flush=True)
        while not stopping.wait(1):
            if server.exit_code() is not None:
                print(f"csparql connect-server: the server exited with code {server.exit_code()}:\n"
                      f"{server.log_tail()}", file=sys.stderr)
                return EXIT_REFUSED
    except ConnectServerError as error:
        print(f"csparql connect-server: {error}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print("stopped", file=sys.stderr)
    return EXIT_OK
