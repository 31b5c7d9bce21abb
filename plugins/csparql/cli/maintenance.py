"""``csparql vacuum``: delete the files the warehouse's Delta tables no longer reference; ``csparql repair``: make
tables whose files are gone readable again."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
HOUR = 3_600_000_000
SAFE_RETENTION_HOURS = 1
"""Below this, a file an evaluation or a reader listed just before a replacement could be deleted under it
(``csparql.storage.maintenance.SAFE_RETENTION_HOURS``)."""


def register(commands) -> None:
    vacuum = commands.add_parser(
        "vacuum",
        help="delete files no Delta table of the warehouse references any more",
        description="In every Delta table of the warehouse (streams, static graphs, results, runs, statistics, "
        "watermarks, closures, panes), delete the files that replacements removed, and files that writes which "
        "failed midway left behind, once older than --retain. Versions older than the retention can then no "
        "longer be read (time travel). Stored panes (a cache of partial results, _csparql/panes) written more "
        "than --retain ago are removed first, and a pane table whose log cannot be read is discarded; a window "
        "that needs them again computes them again. Removed panes stay on disk for --retain more, so an "
        "evaluation that listed them can still read them. Files no commit references (a write in progress, or "
        "one that failed midway) are kept for at least 1h whatever --retain. A retention under 1h (--force) is "
        "refused while evaluations are recorded as running.",
    )
    vacuum.add_argument("--retain", default="7d", metavar="DURATION",
                        help="keep files removed less than this long ago (default 7d, Delta's default; whole hours)")
    vacuum.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    vacuum.add_argument("--force", action="store_true",
                        help=f"accept a retention under {SAFE_RETENTION_HOURS}h: refused while evaluations "
                        "are recorded as running; only when nothing reads the warehouse")
    vacuum.add_argument("--warehouse", metavar="DIR", help="warehouse folder (default: $CSPARQL_WAREHOUSE, else delta_tables/)")
    vacuum.set_defaults(run=run_vacuum)

    repair = commands.add_parser(
        "repair",
        help="make tables whose data files are gone readable again",
        description="In every Delta table of the warehouse, find the data files its latest version references "
        "that are not on disk (deleted under a running write by a vacuum with a short retention, or by hand). "
        "A lost file a compaction wrote is replaced by the files it merged when they are still on disk; other "
        "lost files are dropped from the table in one commit, and the windows a result table lost are marked "
        "for re-evaluation in stale_windows (reason 'result files lost'); the runs table records again the runs "
        "the result tables' commits carry. Prints one line per table; exit 0 when every table is healthy or "
        "repaired.",
    )
    repair.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    repair.add_argument("--warehouse", metavar="DIR",
                        help="warehouse folder (default: $CSPARQL_WAREHOUSE, else delta_tables/)")
    repair.set_defaults(run=run_repair)


def run_vacuum(args: argparse.Namespace) -> int:
    from csparql.storage.delta import StorageError
    from csparql.storage.maintenance import EvaluationsRunning, vacuum
    from csparql.storage.warehouse import Warehouse
    from csparql.core.windows import parse_duration

    try:
        retain = parse_duration(args.retain)
    except ValueError as error:
        print(f"csparql vacuum: --retain {args.retain!r}: {error}", file=sys.stderr)
        return EXIT_USAGE
    if retain % HOUR:
        print(f"csparql vacuum: --retain {args.retain!r}: give whole hours (Delta's retention is in hours)",
              file=sys.stderr)
        return EXIT_USAGE
    hours = retain // HOUR
    if hours < SAFE_RETENTION_HOURS and not args.force:
        print(f"csparql vacuum: --retain {args.retain!r} is under {SAFE_RETENTION_HOURS}h: a running evaluation "
              "or reader could lose the files it is reading; add --force if nothing uses the warehouse",
              file=sys.stderr)
        return EXIT_USAGE
    warehouse = Warehouse.locate(args.warehouse)
    if not warehouse.root.is_dir():
        print(f"csparql vacuum: no warehouse at {warehouse.root}", file=sys.stderr)
        return EXIT_REFUSED
    import time

    from csparql.storage.maintenance import prune_panes

    verb = "would delete" if args.dry_run else "deleted"
    if hours < SAFE_RETENTION_HOURS:
        from csparql.storage.running import running_evaluations

        running = running_evaluations(warehouse)
        if running:
            print(f"csparql vacuum: {EvaluationsRunning(running, [])} (nothing was deleted)", file=sys.stderr)
            return EXIT_REFUSED
    try:
        pruned = prune_panes(warehouse.panes_root, time.time_ns() // 1000 - retain, dry_run=args.dry_run)
        done = vacuum(warehouse.root, hours, dry_run=args.dry_run,
                      skip=[table.table for table in pruned if table.discarded])
    except StorageError as error:
        print(f"csparql vacuum: {error} (nothing was deleted)", file=sys.stderr)
        return EXIT_REFUSED
    except EvaluationsRunning as error:
        deleted = sum(len(table.files) for table in error.done)
        print(f"csparql vacuum: {error} ({f'{deleted} file(s) deleted before' if deleted else 'nothing was deleted'})",
              file=sys.stderr)
        return EXIT_REFUSED
    for table in pruned:
        where = table.table.relative_to(warehouse.root)
        if table.discarded:
            print(f"{where}: {'would discard' if args.dry_run else 'discarded'} the pane table, its log cannot be "
                  f"read ({table.discarded}); its panes are computed again when needed")
        elif table.files:
            print(f"{where}: {'would remove' if args.dry_run else 'removed'} {table.files} file(s) of panes "
                  "written more than the retention ago")
    for table in done:
        if table.files:
            print(f"{table.table.relative_to(warehouse.root)}: {verb} {len(table.files)} file(s), "
                  f"{table.bytes / 2**20:.1f} MB")
    files = sum(len(t.files) for t in done)
    size = sum(t.bytes for t in done)
    print(f"{len(done)} table(s) in {warehouse.root}: {verb} {files} file(s), {size / 2**20:.1f} MB "
          f"(retention {hours}h)")
    return EXIT_OK


def run_repair(args: argparse.Namespace) -> int:
    from csparql.storage.repair import repair_warehouse
    from csparql.storage.warehouse import Warehouse
    from csparql.core.windows import format_instant

    warehouse = Warehouse.locate(args.warehouse)
    if not warehouse.root.is_dir():
        print(f"csparql repair: no warehouse at {warehouse.root}", file=sys.stderr)
        return EXIT_REFUSED
    would = args.dry_run
    done = repair_warehouse(warehouse, dry_run=args.dry_run)
    queries: set[str] = set()
    for table in done:
        where = table.table.relative_to(warehouse.root)
        if table.unreadable is not None:
            print(f"{where}: its Delta log cannot be read ({table.unreadable}); not repaired")
            continue
        if table.healthy:
            print(f"{where}: healthy")
            continue
        said = []
        if table.missing:
            said.append(f"{len(table.missing)} data file(s) missing")
        if table.restored:
            said.append(f"{'would restore' if would else 'restored'} the {len(table.restored)} file(s) a lost "
                        "compaction merged (no row lost)")
        if table.dropped:
            rows = "" if table.lost_rows is None else f", {table.lost_rows} row(s)"
            said.append(f"{'would drop' if would else 'dropped'} {len(table.dropped)} lost file(s) from the "
                        f"table{rows}")
        if table.windows:
            ends = [end for _, end in table.windows]
            span = format_instant(ends[0]) + (f" … {format_instant(ends[-1])}" if len(ends) > 1 else "")
            said.append(f"{'would mark' if would else 'marked'} {len(ends)} window(s) of {table.windows[0][0]} "
                        f"for re-evaluation ({span})")
            queries.add(table.windows[0][0])
        elif table.dropped and table.lost_range is not None and where.parts[0] == "streams":
            low, high = table.lost_range
            said.append(f"the triples timestamped {format_instant(low)} … {format_instant(high)} are lost: "
                        "ingest them again")
        if table.runs_recorded:
            said.append(f"{'would record' if would else 'recorded'} {table.runs_recorded} run(s) again from the "
                        "result tables' commits")
        print(f"{where}: " + "; ".join(said))
    for query in sorted(queries):
        print(f"{query}: its marked windows are re-evaluated by its revision DAG (airflow dags trigger "
              f"revise_{query}) or by csparql run/replay of the query over them")
    unreadable = sum(table.unreadable is not None for table in done)
    repaired = sum(not table.healthy and table.unreadable is None for table in done)
    print(f"{len(done)} table(s) in {warehouse.root}: {repaired} {'to repair' if would else 'repaired'}, "
          f"{len(done) - repaired - unreadable} healthy" + (f", {unreadable} unreadable" if unreadable else ""))
    return EXIT_REFUSED if unreadable else EXIT_OK
