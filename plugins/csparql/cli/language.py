"""``csparql check``, ``csparql explain`` and ``csparql translate``: the language front end from the command line.

Every command that takes a query reads C-SPARQL and RSP-QL, told apart from the text unless ``--dialect``
says which (``add_dialect_option``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from csparql.core.algebra.sexpr import format_plan
from csparql.core.frontend import compile_query, parse_query, query_dialect
from csparql.core.language import syntax as sx
from csparql.core.language.dialect import DIALECT_NAMES, RSPQL
from csparql.core.language.errors import Diagnostic, QueryError
from csparql.core.language.parser import DIALECTS
from csparql.core.language.printer import format_query
from csparql.core.language.rspql_printer import NotExpressibleError, format_rspql, untranslatable_to_csparql
from csparql.core.optimizer import optimize


def register(commands) -> None:
    check = commands.add_parser(
        "check",
        help="validate queries and print them normalised",
        description="Validate C-SPARQL or RSP-QL queries. Prints each valid query normalised, in its own "
        "dialect; reports every problem with line, column and a caret. Exit 0 when all are valid, 1 otherwise. "
        "'-' reads standard input.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="query files ('-' for standard input)")
    check.add_argument("--quiet", "-q", action="store_true", help="print only the problems")
    add_dialect_option(check)
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
    add_dialect_option(explain)
    explain.set_defaults(run=run_explain)

    translate = commands.add_parser(
        "translate",
        help="print a query in the other dialect (C-SPARQL or RSP-QL)",
        description="Print the query of FILE in the dialect --to names, when that dialect can express it; "
        "otherwise say, with line, column and a caret, each construct it cannot express (exit 1). The printed "
        "query has the same algebra as the original. '-' reads standard input.",
    )
    translate.add_argument("file", metavar="FILE", help="query file ('-' for standard input)")
    translate.add_argument("--to", required=True, choices=DIALECTS, help="the dialect to print the query in")
    add_dialect_option(translate)
    translate.set_defaults(run=run_translate)


def add_dialect_option(parser: argparse.ArgumentParser) -> None:
    """``--dialect csparql|rspql`` for a command that reads queries (default: told from each query's text)."""
    parser.add_argument(
        "--dialect", choices=DIALECTS, default=None,
        help="the query language: csparql (C-SPARQL) or rspql (RSP-QL, as RSP4J, Yasper, rsp-js and rsp-rs "
        "write it); default: told from the text",
    )


def format_in_dialect(query: sx.Query, dialect: str) -> str:
    """A valid query printed normalised in ``dialect``; ``NotExpressibleError`` when that dialect cannot say it."""
    if dialect == RSPQL:
        return format_rspql(query)
    problems = untranslatable_to_csparql(query)
    if problems:
        raise NotExpressibleError(problems)
    return format_query(query)


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
        dialect = query_dialect(text, args.dialect)
        try:
            query = parse_query(text, source_name, dialect)
        except QueryError as error:
            failures += 1
            print(error.render(), file=sys.stderr)
            continue
        if not args.quiet:
            if len(args.files) > 1:
                print(f"# {source_name}" if index == 0 else f"\n# {source_name}")
            sys.stdout.write(format_in_dialect(query, dialect))
    if len(args.files) > 1:
        print(f"{len(args.files) - failures} of {len(args.files)} valid", file=sys.stderr)
    return 1 if failures else 0


def run_explain(args: argparse.Namespace) -> int:
    source = _read_or_report(args.file)
    if source is None:
        return 1
    text, source_name = source
    try:
        plan = compile_query(text, source_name, args.dialect)
    except QueryError as error:
        print(error.render(), file=sys.stderr)
        return 1
    from csparql.deploy.file_settings import FileSettings
    from csparql.deploy.registry import RegistrationError
    from csparql.storage.statistics import read_statistics
    from csparql.storage.warehouse import Warehouse

    try:
        panes_setting = FileSettings.of(Path(source_name), text).panes
    except RegistrationError as error:
        print(f"{source_name}: error: {error.message}", file=sys.stderr)
        return 1

    warehouse = Warehouse.locate(args.warehouse)
    statistics = read_statistics(warehouse)
    print("# algebra")
    sys.stdout.write(format_plan(plan))
    known = len(statistics.predicate_counts)
    print(f"\n# optimized (statistics of {known} source(s) from {warehouse.root})" if known else "\n# optimized (no statistics: the sources each pattern can read are not narrowed)")
    if plan.entailment:
        print(f"# under ENTAILMENT {', '.join(plan.entailment)} each pattern is matched against the entailed graph when it is "
              "compiled for Spark, and a property also counts its sub-properties' triples (docs/entailment.md)")
    optimized = optimize(plan, statistics)
    sys.stdout.write(format_plan(optimized))
    _explain_panes(optimized, panes_setting)
    return 0


def _explain_panes(plan, setting: str | None) -> None:
    """Print the ``# panes`` section of ``csparql explain``: the query's pane plan (and the plans each pane and
    each window evaluate) or why it recomputes, and what its file's pane mode (``# csparql panes``) does."""
    from csparql.core.algebra.sexpr import format_operator
    from csparql.engine.panes import pane_min_triples
    from csparql.core.panes import (ALWAYS, AUTO, OFF, PanePlan, automatic_refusal, pane_combination_plan, pane_partial_plan,
                               pane_plan)

    decision = pane_plan(plan)
    mode = setting or AUTO
    print(f"\n# panes ({mode}{'' if setting else ', the default'})")
    prefixes = dict(plan.prefixes)
    lines = decision.describe(prefixes) if isinstance(decision, PanePlan) else decision.describe()
    for line in lines:
        print(line)
    if mode == OFF:
        print("turned off by the file's '# csparql panes off': every window is recomputed")
    if mode == OFF or not isinstance(decision, PanePlan):
        return
    refusal = automatic_refusal(decision)
    if mode == AUTO and refusal is not None:
        print(f"auto recomputes every window: {refusal}")
    elif mode == AUTO:
        print(f"auto: windows whose stream files hold at least {pane_min_triples():,} triples "
              "(CSPARQL_PANES_MIN_TRIPLES) are combined from panes, smaller ones recomputed")
    else:
        print(f"{ALWAYS}: every window is combined from panes")
    partial = pane_partial_plan(plan, decision)
    print("each pane evaluates (?.pane: the end of the pane of its stream triple):")
    print(format_operator(partial.plan.pattern, prefixes), end="")
    print("each window combines its panes' stored rows:")
    print(format_operator(pane_combination_plan(plan, decision, partial).pattern, prefixes), end="")


def run_translate(args: argparse.Namespace) -> int:
    source = _read_or_report(args.file)
    if source is None:
        return 1
    text, source_name = source
    dialect = query_dialect(text, args.dialect)
    try:
        query = parse_query(text, source_name, dialect)
        printed = format_in_dialect(query, args.to)
    except NotExpressibleError as error:
        print(f"{source_name}: error: {DIALECT_NAMES[args.to]} cannot express this {DIALECT_NAMES[dialect]} query:",
              file=sys.stderr)
        print(error.with_source(text, source_name).render(), file=sys.stderr)
        return 1
    except QueryError as error:
        print(error.render(), file=sys.stderr)
        return 1
    for note in translation_notes(query, dialect, args.to):
        print(note.render(text, source_name).replace(": error: ", ": note: ", 1), file=sys.stderr)
    sys.stdout.write(printed)
    return 0


def translation_notes(query: sx.Query, source: str, target: str) -> list[Diagnostic]:
    """What a translation says differently without changing what the query means (printed as notes)."""
    notes: list[Diagnostic] = []
    registration = query.registration
    if source == RSPQL and target != RSPQL and registration is not None and registration.output is not None:
        notes.append(Diagnostic(
            f"the output IRI <{registration.output}> becomes the query name '{registration.name}' (C-SPARQL "
            "names registered queries; a REGISTER STREAM query's output stream is urn:csparql:stream:"
            f"{registration.name})", registration.span))
    if target == RSPQL and registration is not None and registration.computed_every is not None:
        notes.append(Diagnostic(
            "COMPUTED EVERY is left out: it is the period the windows' STEP gives anyway",
            registration.computed_every.span))
    return notes
