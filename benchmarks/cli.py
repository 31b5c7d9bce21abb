"""The command line of the benchmarks (``./bench.sh``, ``python -m benchmarks``)."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from benchmarks.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUNS = ROOT / "benchmarks" / "runs"
ONLY_RATIO = ["window_sizes=", "workloads=", "histories=", "srbench_stations=", "airflow=false"]
"""The parameters that leave only the sliding-ratio sweep (``--only-ratio``)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench.sh",
        description="Measure csparql's window evaluation against hand-written Spark, DuckDB, pyoxigraph and rdflib, "
                    "against the FILTER approach of the social-data paper, and end to end through Airflow. Writes a run folder with "
                    "results.json, table.md and PNG plots.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="tiny sizes, fewer repetitions: a few minutes on two cores (the default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the full sizes (window 10k → 10M, history 1× → 100×, ratio 1 → 30): hours")
    mode.add_argument("--profile", dest="mode", action="store_const", const="profile",
                      help="where a warm window evaluation's time goes, phase by phase (benchmarks/window_profile.py; "
                           "--set warmups=2 --set repetitions=7)")
    mode.add_argument("--soak", dest="mode", action="store_const", const="soak",
                      help="the embedded stack for hours (default 2) with streams landing live, idle gaps, a "
                           "component killed every 20 minutes and vacuums; every due window checked against "
                           "pyoxigraph (benchmarks/soak.py; --set soak_hours=3, soak_gap_minutes=12, …)")
    mode.add_argument("--wake", dest="mode", action="store_const", const="wake",
                      help="from a window's completing commit to its trigger's event, with the commit watch and "
                           "with the poll alone, side by side (benchmarks/trigger_wake.py; --set trials=30)")
    mode.add_argument("--together", dest="mode", action="store_const", const="together",
                      help="windows of many queries due at one instant on one triggerer: one by one as before "
                           "batching, and batched two and four at a time, side by side (benchmarks/due_together.py; "
                           "--set queries=20 --set trials=5)")
    parser.add_argument("--out", metavar="DIR", help="the run folder (default benchmarks/runs/<time>-<mode>)")
    parser.add_argument("--master", metavar="URL", help="--profile: the Spark master (default local[2]; "
                                                        "sc://host:port for a Spark Connect server)")
    parser.add_argument("--workloads", metavar="NAMES", help="--profile: comma-separated workloads (default: "
                                                             "district_count,two_streams,srbench_q01,srbench_q04,srbench_q12)")
    parser.add_argument("--data", metavar="DIR", help="--profile: evaluate the warehouses an earlier profile built "
                                                      "(its data/ folder) instead of building them")
    parser.add_argument("--set", metavar="FIELD=VALUE", action="append", default=[],
                        help="override a parameter, e.g. --set window_sizes=10000,100000 --set repetitions=3 "
                             "(see benchmarks/profiles.py); repeatable")
    parser.add_argument("--no-airflow", action="store_true", help="skip the end-to-end Airflow measurement")
    parser.add_argument("--only-airflow", action="store_true",
                        help="only the end-to-end Airflow measurements: the capacity sweep and the shortest period "
                             "(e.g. ./bench.sh --full --only-airflow --set airflow_modes=connect)")
    parser.add_argument("--only-ratio", action="store_true",
                        help="only the sliding-ratio sweep (recompute, panes live and replayed, hand-written Spark, "
                             "DuckDB), no Airflow (e.g. ./bench.sh --full --only-ratio --set ratios=1,30)")
    parser.add_argument("--keep-data", action="store_true", help="keep the generated data and warehouses (work/)")
    parser.add_argument("--report", metavar="RUN_DIR",
                        help="only write table.md and the plots again from RUN_DIR/results.json")
    parser.set_defaults(mode="quick")
    return parser



def _whole_numbers(assignments: list[str], fields: dict[str, tuple[int, int]]) -> dict[str, int] | str:
    """The counts ``--set field=N`` gives a mode, each field's default and least value in ``fields`` (name →
    (default, least)); or the message for the first that is not a whole number at least its least value."""
    given = dict(a.split("=", 1) for a in assignments if "=" in a)
    counts = {}
    for name, (default, least) in fields.items():
        value = given.get(name, str(default))
        if not value.isdigit() or int(value) < least:
            return f"bench: --set {name}={value}: give a whole number, at least {least}"
        counts[name] = int(value)
    return counts

def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "py4j.clientserver", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.report:
        from benchmarks import report

        folder = Path(args.report)
        result = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        result["targets"] = report.targets(result)
        report.write(result, folder)
        print(folder / "table.md")
        return 0
    if args.mode == "wake":
        from benchmarks import trigger_wake

        given = [a.split("=", 1)[1] for a in args.set if a.startswith("trials=")]
        if not given:
            trigger_wake.main()
            return 0
        if not given[-1].isdigit() or int(given[-1]) < 1:
            print(f"bench: --set trials={given[-1]}: give a whole number of trials, at least 1")
            return 2
        trigger_wake.main(int(given[-1]))
        return 0
    if args.mode == "together":
        from benchmarks import due_together

        counts = _whole_numbers(args.set, {"queries": (20, 1), "trials": (5, 1)})
        if isinstance(counts, str):
            print(counts)
            return 2
        due_together.main(counts["queries"], counts["trials"])
        return 0
    if args.mode == "profile":
        from benchmarks import window_profile

        out = Path(args.out) if args.out else DEFAULT_RUNS / f"{time.strftime('%Y%m%dT%H%M%S')}-profile"
        names = tuple(args.workloads.split(",")) if args.workloads else window_profile.WORKLOADS
        counts = _whole_numbers(args.set, {"warmups": (2, 0), "repetitions": (7, 1)})
        if isinstance(counts, str):
            print(counts)
            return 2
        window_profile.profile(out.resolve(), master=args.master, names=names, warmups=counts["warmups"],
                               repetitions=counts["repetitions"],
                               data_folder=Path(args.data).resolve() if args.data else None)
        print((out / "profile.md").read_text(encoding="utf-8"))
        return 0
    if args.mode == "soak":
        return _soak(args)
    profile = PROFILES[args.mode]
    try:
        assignments = (list(args.set) + (["airflow=false"] if args.no_airflow else [])
                       + (["sweeps=false"] if args.only_airflow else [])
                       + (ONLY_RATIO if args.only_ratio else []))
        profile = profile.override(assignments)
    except ValueError as error:
        print(f"bench: {error}")
        return 2
    out = Path(args.out) if args.out else DEFAULT_RUNS / f"{time.strftime('%Y%m%dT%H%M%S')}-{profile.mode}"
    from benchmarks.run import BenchmarkRun

    result = BenchmarkRun(profile, out, keep_data=args.keep_data).execute()
    print(f"\nrun folder: {out}\n")
    print((out / "table.md").read_text(encoding="utf-8"))
    failed = [m for m in result["measurements"] if m["status"] == "failed"]
    differing = [m for m in result["measurements"] if m.get("agrees_with_reference") is False]
    return 1 if failed or differing or result["airflow"].get("status") == "failed" else 0


def _soak(args: argparse.Namespace) -> int:
    """``--soak``: the plan's fields from ``--set soak_<field>=value``; exit 1 unless every window was right."""
    import dataclasses

    from benchmarks.soak import SoakPlan, run_soak

    plan = SoakPlan()
    fields = {f.name: f.type for f in dataclasses.fields(SoakPlan)}
    for assignment in args.set:
        key, _, value = assignment.partition("=")
        field = key.removeprefix("soak_")
        if not key.startswith("soak_") or field not in fields:
            print(f"bench: --soak takes --set soak_<field>=value with a field of {', '.join(fields)}, not {key!r}")
            return 2
        current = getattr(plan, field)
        try:
            setattr(plan, field, type(current)(value))
        except ValueError:
            print(f"bench: --set {assignment}: not a {type(current).__name__}")
            return 2
    out = Path(args.out) if args.out else DEFAULT_RUNS / f"{time.strftime('%Y%m%dT%H%M%S')}-soak"
    result = run_soak(out.resolve(), plan)
    print((out / "report.md").read_text(encoding="utf-8"))
    return 0 if result["status"] == "ok" else 1
