"""``csparql demo``: the engine end to end on sample data.

It writes the sample streams and static graphs (``csparql.samples``), ingests the streams and loads the
graphs into a demo warehouse through the same code as ``csparql ingest`` and ``load-static``, then replays
the last windows of every example query and prints their results. The demo warehouse is recreated on each
run (``delta_tables/demo`` in the working directory by default), so the demo can be run again and again; explore it afterwards with
``CSPARQL_WAREHOUSE=delta_tables/demo csparql sql --tables``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from csparql.examples import examples_folder
from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError

EXAMPLES = examples_folder("queries")
WINDOWS_PER_QUERY = 3
ROWS_SHOWN = 8


def run_demo(warehouse_root: Path, examples: Path = EXAMPLES, master: str | None = None, out=sys.stdout,
             stream_format: str = "tnq") -> int:
    from csparql.storage.formats import render
    from csparql.ingest.ingest import ingest_stream, load_static
    from csparql.deploy.history import text_owner
    from csparql.engine.runner import Engine, EvaluationFailed
    from csparql.storage.results import QueryTextCollision, ResultTable
    from csparql.samples import write_samples
    from csparql.core.schedule import evaluation_period, scheduled_evaluations
    from csparql.runtime.session import spark_session
    from csparql.storage.warehouse import Warehouse, default_query_name
    from csparql.core.windows import format_instant

    if warehouse_root.exists():
        shutil.rmtree(warehouse_root)
    warehouse = Warehouse(warehouse_root)
    samples = write_samples(warehouse_root / "_samples", format=stream_format)
    print(f"sample data: {format_instant(samples.start)} to {format_instant(samples.end)} in {warehouse_root / '_samples'}", file=out)
    spark = spark_session(master)
    for iri, path in samples.streams.items():
        report = ingest_stream(spark, warehouse, iri, [path])
        print(f"  ingested {report.landed} triples into <{iri}>", file=out)
    for iri, path in samples.graphs.items():
        report = load_static(spark, warehouse, iri, [path], replace=True)
        print(f"  loaded {report.landed} triples into the {'default graph' if iri is None else f'graph <{iri}>'}", file=out)

    engine = Engine(warehouse, spark)
    failures = 0
    for path in sorted(examples.glob("*.rq")):
        text = path.read_text(encoding="utf-8")
        try:
            plan = compile_query(text, path.name)
        except QueryError as error:
            print(f"\n=== {path.name}: refused, as the specification expects\n{error.render()}", file=out)
            continue
        name = plan.registration.name if plan.registration else default_query_name(path.name)
        owner = text_owner(text, name)
        try:
            ResultTable.check_owner(warehouse, plan, name, owner)
        except QueryTextCollision as error:
            failures += 1
            print(f"\n=== {path.name} ({name}): not evaluated: {error}", file=out)
            continue
        period = evaluation_period(plan)
        if period is None:
            windows = [None]
        else:
            # The last windows that hold sample data: up to the first one closing after the data ends.
            scheduled = scheduled_evaluations(plan, samples.start + 1, samples.end + period - 1)
            windows = scheduled[-WINDOWS_PER_QUERY:]
        print(f"\n=== {path.name} ({name})", file=out)
        for window in windows:
            at = samples.end if window is None else window.at
            try:
                evaluation = engine.evaluate(plan, at, name, version=owner.version, owner=owner)
            except EvaluationFailed as error:
                failures += 1
                print(f"--- {error}", file=out)
                continue
            bounds = evaluation.window
            span = f"({format_instant(bounds.start)}, {format_instant(bounds.end)}]" if bounds.start is not None else f"at {format_instant(bounds.end)}"
            print(f"--- window {span}: {len(evaluation.result)} result(s) in {evaluation.duration_ms} ms", file=out)
            text = render(evaluation.result, "tsv").splitlines()
            for line in text[: ROWS_SHOWN + 1]:
                print(line, file=out)
            if len(text) > ROWS_SHOWN + 1:
                print(f"… {len(text) - ROWS_SHOWN - 1} more", file=out)
    print(f"\nresults, runs and streams are in {warehouse_root}; try:\n"
          f"  CSPARQL_WAREHOUSE={warehouse_root} .venv/bin/csparql sql \"SELECT query, status, window_end, rows_written, duration_ms FROM runs\"", file=out)
    if failures:
        print(f"\n{failures} evaluation(s) failed; see the runs table for their errors", file=out)
    return 1 if failures else 0
