"""``csparql vacuum``: delete the files the warehouse's Delta tables no longer reference."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
HOUR = 3_600_000_000
SAFE_RETENTION_HOURS = 1
"""Below this, a file an evaluation or a reader listed just before a replacement could be deleted under it."""


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
        "evaluation that listed them can still read them.",
    )
    vacuum.add_argument("--retain", default="7d", metavar="DURATION",
                        help="keep files removed less than this long ago (default 7d, Delta's default; whole hours)")
    vacuum.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    vacuum.add_argument("--force", action="store_true",
                        help=f"accept a retention under {SAFE_RETENTION_HOURS}h: only when nothing evaluates, "
                        "ingests or reads the warehouse")
    vacuum.add_argument("--warehouse", metavar="DIR", help="warehouse folder (default: $CSPARQL_WAREHOUSE, else delta_tables/)")
    vacuum.set_defaults(run=run_vacuum)


def run_vacuum(args: argparse.Namespace) -> int:
    from csparql.storage.delta import StorageError
    from csparql.storage.maintenance import vacuum
    from csparql.storage.warehouse import Warehouse
    from csparql.windows import parse_duration

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
    try:
        pruned = prune_panes(warehouse.panes_root, time.time_ns() // 1000 - retain, dry_run=args.dry_run)
        done = vacuum(warehouse.root, hours, dry_run=args.dry_run,
                      skip=[table.table for table in pruned if table.discarded])
    except StorageError as error:
        print(f"csparql vacuum: {error} (nothing was deleted)", file=sys.stderr)
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
