"""The main job at this stage of the product: a tour of the language front end over the example queries.

For each query of ``examples/queries`` it prints whether it is accepted (with its normalised text) or
refused (with the error a user sees); for the worked example of 000 §5.5 it also prints the plan before and
after optimisation, split into its stream and static parts.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rdflib import URIRef

from csparql.algebra.sexpr import format_plan
from csparql.compiler import compile_query, parse_query
from csparql.language.errors import QueryError
from csparql.language.printer import format_query
from csparql.optimizer import SourceStatistics, optimize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queries"
WORKED_EXAMPLE = "05-cars-per-street-worked-example.rq"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="csparql-tour", description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=EXAMPLES, help="folder of .rq files")
    args = parser.parse_args(argv)
    files = sorted(args.folder.glob("*.rq"))
    if not files:
        print(f"no .rq files in {args.folder}", file=sys.stderr)
        return 1
    accepted = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        expect = re.search(r"^# expect: (\w+)", text, flags=re.M)
        print(f"=== {path.name}" + (f"  (the specification expects: {expect.group(1)})" if expect else ""))
        try:
            print(format_query(parse_query(text, path.name)))
            accepted += 1
        except QueryError as error:
            print(error.render() + "\n")
    worked = args.folder / WORKED_EXAMPLE
    if worked.exists():
        plan = compile_query(worked.read_text(encoding="utf-8"), worked.name)
        statistics = SourceStatistics(
            {
                URIRef("http://streams.org/milantollgates.trdf"): {URIRef("http://linkedurbandata.org/traffic#registers"): 5},
                None: {URIRef("http://linkedurbandata.org/city#placedIn"): 2},
            }
        )
        print(f"=== the plan of {worked.name} (000 §5.5), as translated")
        print(format_plan(plan))
        print("=== and optimised: the stream window and the static graph are read by separate parts")
        print(format_plan(optimize(plan, statistics)))
    print(f"{accepted} of {len(files)} example queries accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
