"""``csparql ingest`` and ``csparql load-static``: RDF streams and static graphs into the warehouse.

Exit codes: 0 everything landed (or nothing needed to: the same content had landed before, see ``--again``);
1 some lines were rejected (the good ones landed; see the rejects file) or
the warehouse refused the write (nothing landed); 2 a usage error (a missing or unreadable file, an unknown
format, a bad option), reported before anything is read or written.
"""

from __future__ import annotations

import argparse
import os
import sys

from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES

EXIT_OK, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2

FORMATS_HELP = ("nquads (timestamps as fourth terms, or standard N-Quads: timestamped graphs), ntriples, turtle, "
                "xml, n3, trig, trix, json-ld")


def register(commands) -> None:
    ingest = commands.add_parser(
        "ingest",
        help="land timestamped RDF in a stream table",
        description="Land RDF stream files in the stream's Delta table, in one commit. Timestamped N-Quads "
        "(.nq, .tnq) carry each triple's timestamp as the fourth term: an xsd:dateTime literal or epoch "
        "milliseconds. TriG, TriX and JSON-LD are timestamped named graphs: each graph's triples take the instant "
        "a triple about the graph gives (see --timestamp-predicate). Plain RDF (N-Triples, Turtle, any other "
        "format rdflib reads) needs --timestamp. Malformed "
        "lines go to a rejects file (file, line, reason, text; default <file>.rejects.tsv) and the good ones "
        "land; so do triples timestamped further in the future than --max-future-skew, so that the stream's "
        "watermark (the greatest timestamp landed, which never goes back) never runs ahead of the clock by more. "
        "The same content (the same bytes into the same stream, with the same --timestamp) lands once: run again, "
        "the ingest lands nothing and says where it landed, unless --again is given. "
        "Exit 0 when all landed (or had landed), 1 when some were rejected, 2 for a usage error.",
    )
    ingest.add_argument("files", nargs="+", metavar="FILE", help="input files")
    ingest.add_argument("--stream", required=True, metavar="IRI", help="the stream's IRI")
    ingest.add_argument(
        "--timestamp", metavar="T",
        help="timestamp of triples that carry none (ISO 8601 with a zone, e.g. 2010-03-22T10:00:00Z, or epoch "
        "milliseconds); required for N-Triples, Turtle and the other plain RDF formats",
    )
    ingest.add_argument(
        "--timestamp-predicate", metavar="IRI", action="append",
        help="in TriG, TriX and JSON-LD, a named graph is an event timestamped by a triple about the graph with this "
        f"predicate, in the default graph or in the graph; repeat it to accept several (default: "
        f"{DEFAULT_TIMESTAMP_PREDICATES[0]})",
    )
    ingest.add_argument(
        "--max-future-skew", metavar="D",
        help="reject triples timestamped later than the clock plus D, e.g. 30s, 1h, 2d, at most 36525d (default: "
        "$CSPARQL_MAX_FUTURE_SKEW, else 1h)",
    )
    _again_option(ingest, "stream")
    _common(ingest)
    ingest.set_defaults(run=run_ingest)

    load = commands.add_parser(
        "load-static",
        help="load a static graph",
        description="Load static RDF (any format rdflib reads) into a static graph's Delta table, in one "
        "commit: the default graph, or the named graph --graph. Appends by default (triples already there "
        "are not added twice, and a file whose content the graph holds already lands nothing unless --again is "
        "given); --replace replaces the graph's content. Malformed lines go to a rejects file. "
        "Exit 0 when all landed (or had landed), 1 when some were rejected, 2 for a usage error.",
    )
    load.add_argument("files", nargs="+", metavar="FILE", help="input files")
    load.add_argument("--graph", metavar="IRI", help="the named graph to load (default: the default graph)")
    load.add_argument("--replace", action="store_true", help="replace the graph's content instead of adding to it")
    _again_option(load, "graph")
    _common(load)
    load.set_defaults(run=run_load_static)

    streams = commands.add_parser(
        "streams",
        help="list the streams: table, landing folder and watermark of each",
        description="List every stream of the warehouse and every stream a registered query reads: its IRI, its "
        "Delta table, the landing folder its ingestion DAG lands files from (none for a stream a registered "
        "query produces), its watermark and its triples. --landing IRI prints only that stream's landing folder.",
    )
    streams.add_argument("--landing", metavar="IRI", help="print only the landing folder of the stream IRI")
    streams.add_argument("--warehouse", metavar="DIR", help="the warehouse folder (default: $CSPARQL_WAREHOUSE, else ./delta_tables)")
    streams.set_defaults(run=run_streams)

    samples = commands.add_parser(
        "samples",
        help="write the sample streams and static graphs of the examples",
        description="Write the sample data the example queries read (the data `csparql demo` and `csparql stack` "
        "use): one timestamped N-Quads file per stream and one Turtle file per static graph, in DIR, starting "
        "2010-03-22T08:00:00Z; the same files every time. Prints each file with the command that loads it.",
    )
    samples.add_argument("folder", metavar="DIR", help="the folder to write them into (created if missing)")
    samples.add_argument("--hours", type=int, default=3, help="hours of stream data (default 3)")
    samples.add_argument("--format", choices=("tnq", "trig", "nq", "jsonld"), default="tnq",
                         help="the streams' format: tnq (the project's line format, the default), or timestamped "
                              "named graphs in trig, nq (standard N-Quads) or jsonld")
    samples.set_defaults(run=run_samples)


def _again_option(parser: argparse.ArgumentParser, target: str) -> None:
    parser.add_argument(
        "--again", action="store_true",
        help=f"land the files even if the same content (the same bytes into the same {target}, with the same "
        "--timestamp) landed before; without it, such a run lands nothing and says where it landed",
    )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", metavar="FORMAT", help=f"input format, instead of the file extension: {FORMATS_HELP}")
    parser.add_argument("--rejects", metavar="PATH", help="write every reject to this file (default: <file>.rejects.tsv next to each input)")
    parser.add_argument("--warehouse", metavar="DIR", help="the warehouse folder (default: $CSPARQL_WAREHOUSE, else ./delta_tables)")
    parser.add_argument("--master", metavar="URL", help="Spark master: local[*], spark://host:7077 or sc://host:15002 (default: $CSPARQL_SPARK_MASTER, else $SPARK_REMOTE, else local[*])")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _report_already_landed(command: str, report, where: str) -> int:
    """Say that the content landed before and where (on stderr), and exit 0: nothing was wrong."""
    print(f"csparql {command}: nothing landed: the same content already landed in {where} in "
          f"{report.already_landed.describe()}; use --again to land it again", file=sys.stderr)
    for warning in report.warnings:
        print(f"csparql {command}: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _report(command: str, report, where: str) -> int:
    line = f"{_plural(report.landed, 'triple')} landed in {where} ({_plural(report.files, 'file')}), {report.rejected} rejected"
    if report.rejected:
        line += " — see " + ", ".join(str(p) for p in report.rejects_paths)
    print(line)
    for reject in report.first_rejects:
        where_ = f"{reject.file}:{reject.line}" if reject.line else reject.file
        print(f"{where_}: {reject.reason}", file=sys.stderr)
    if report.rejected > len(report.first_rejects):
        print(f"... and {report.rejected - len(report.first_rejects)} more in the rejects file", file=sys.stderr)
    for warning in report.warnings:
        print(f"csparql {command}: warning: {warning}", file=sys.stderr)
    return EXIT_REJECTED if report.rejected else EXIT_OK


def _run(command: str, args: argparse.Namespace, work) -> int:
    # Spark and Delta are imported here, not at module level, so that `csparql check` stays fast.
    from csparql.ingest.ingest import InputError
    from csparql.storage.delta import StorageError, TableFeatureError
    from csparql.storage.warehouse import Warehouse

    try:
        warehouse = Warehouse.locate(args.warehouse)
        return work(warehouse)
    except InputError as error:
        print(f"csparql {command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (StorageError, TableFeatureError) as error:
        print(f"csparql {command}: error: {error}; nothing was written", file=sys.stderr)
        return EXIT_REJECTED


def _max_future_skew(text: str | None) -> int:
    """``--max-future-skew`` in µs, else ``$CSPARQL_MAX_FUTURE_SKEW``, else the default; InputError naming
    the option or the variable for a value that cannot be used."""
    from csparql.deploy.settings import max_future_skew_setting
    from csparql.ingest.ingest import InputError
    from csparql.storage.watermarks import check_future_skew
    from csparql.core.windows import parse_duration

    try:
        if text is None:
            return max_future_skew_setting()
        skew = parse_duration(text)
    except ValueError as error:
        raise InputError(str(error) if text is None else f"--max-future-skew: {error}") from None
    try:
        return check_future_skew(skew)
    except ValueError as error:
        raise InputError(f"--max-future-skew: {error}") from None


def run_ingest(args: argparse.Namespace) -> int:
    def work(warehouse) -> int:
        from csparql.ingest.ingest import check_stream_request, content_digest, ingest_stream, landed_content
        from csparql.runtime.session import spark_session
        from csparql.storage.revisions import table_version

        skew = _max_future_skew(args.max_future_skew)
        # everything that can be wrong with the request is found before Spark starts
        predicates = tuple(args.timestamp_predicate or DEFAULT_TIMESTAMP_PREDICATES)
        iri, inputs, micros, _, _ = check_stream_request(args.stream, args.files, args.timestamp, args.format,
                                                          args.rejects, skew, predicates)
        before = table_version(warehouse.stream(iri))
        # content that landed before needs no Spark: ingest_stream only completes its watermark
        landed = not args.again and landed_content(warehouse.stream(iri),
                                                   content_digest(iri, [i.path for i in inputs], micros, predicates))
        report = ingest_stream(
            None if landed else spark_session(args.master), warehouse, args.stream, args.files,
            timestamp=args.timestamp, format=args.format, rejects=args.rejects, max_future_skew=skew,
            again=args.again, timestamp_predicates=predicates,
        )
        if report.already_landed is not None:
            code = _report_already_landed("ingest", report, f"<{report.target}>")
            # an ingest that stopped after its commit did not look for the windows its triples made stale
            _report_stale_windows(warehouse, report.target, report.already_landed.version - 1)
            return code
        code = _report("ingest", report, f"<{report.target}>")
        if report.version is not None:
            _report_stale_windows(warehouse, report.target, before)
        return code

    return _run("ingest", args, work)


def _report_stale_windows(warehouse, stream: str, before: int) -> None:
    """Record the evaluated windows (of the queries of ``$CSPARQL_REGISTRY`` and of any query run without being
    registered) that the stream's commits after version ``before`` made stale, and say how many
    (``csparql.deploy.revisions``); the registered queries' revision DAGs revise them when next started. The
    triples have landed by now, so a failure here is a warning, not an error."""
    import dataclasses

    from csparql.deploy.revisions import detect_after_commits
    from csparql.deploy.settings import Settings

    try:
        settings = dataclasses.replace(Settings.from_environment(), warehouse=warehouse)
    except ValueError as error:
        print(f"csparql ingest: warning: stale windows not looked for: {error}", file=sys.stderr)
        return
    try:
        stale = detect_after_commits(settings, stream, before)
    except Exception as error:  # the data is committed: say so rather than fail
        print(f"csparql ingest: warning: the triples landed, but stale windows were not looked for: "
              f"{type(error).__name__}: {error}", file=sys.stderr)
        return
    pending = sorted({(w.query, w.window_end) for w in stale if w.status == "pending"})
    if stale:
        print(f"{_plural(len({(w.query, w.window_end) for w in stale}), 'window')} evaluated before these triples "
              f"landed are stale ({len(pending)} within the revision horizon; see _csparql/stale_windows)")


def run_load_static(args: argparse.Namespace) -> int:
    def work(warehouse) -> int:
        from csparql.ingest.ingest import check_static_request, content_digest, landed_content, load_static
        from csparql.runtime.session import spark_session

        graph, inputs, _ = check_static_request(args.graph, args.files, args.format, args.rejects)  # before Spark
        landed = not (args.again or args.replace) and landed_content(
            warehouse.static(graph), content_digest(graph or "", [i.path for i in inputs]))
        report = load_static(
            None if landed else spark_session(args.master), warehouse, args.graph, args.files,
            replace=args.replace, format=args.format, rejects=args.rejects, again=args.again,
        )
        where = f"the graph <{report.target}>" if report.target else "the default graph"
        if report.already_landed is not None:
            return _report_already_landed("load-static", report, where)
        return _report("load-static", report, where)

    return _run("load-static", args, work)


def run_streams(args: argparse.Namespace) -> int:
    import dataclasses

    from csparql.deploy.monitoring import stream_statistics
    from csparql.deploy.plan import ingested_streams
    from csparql.deploy.settings import Settings
    from csparql.storage.warehouse import Warehouse
    from csparql.core.windows import format_instant

    try:
        settings = Settings.from_environment()
    except ValueError as error:
        print(f"csparql streams: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.warehouse:
        warehouse = Warehouse.locate(args.warehouse)
        landing = settings.landing if os.environ.get("CSPARQL_LANDING") else warehouse.root / "landing"
        settings = dataclasses.replace(settings, warehouse=warehouse, landing=landing.resolve())
    if args.landing:
        print(settings.landing_folder(args.landing))
        return EXIT_OK
    tables = {stream.iri: stream for stream in stream_statistics(settings.warehouse)}
    read = set(ingested_streams(settings))
    if not tables and not read:
        print(f"no streams in {settings.warehouse.root} and none read by the queries of {settings.registry}",
              file=sys.stderr)
        return EXIT_OK
    print("stream\ttable\tlanding folder\twatermark\ttriples")
    for iri in sorted(tables.keys() | read):
        stream = tables.get(iri)
        produced = stream is not None and stream.produced_by
        landing = f"(produced by {stream.produced_by})" if produced else str(settings.landing_folder(iri))
        table = stream.folder if stream is not None else f"{settings.warehouse.stream(iri)} (nothing landed yet)"
        mark = format_instant(stream.watermark) if stream is not None and stream.watermark is not None else "-"
        triples = "-" if stream is None or stream.size.triples is None else str(stream.size.triples)
        print(f"<{iri}>\t{table}\t{landing}\t{mark}\t{triples}")
    return EXIT_OK


def run_samples(args: argparse.Namespace) -> int:
    from pathlib import Path

    from csparql.samples import write_samples

    if args.hours < 1:
        print(f"csparql samples: --hours {args.hours}: give 1 or more", file=sys.stderr)
        return EXIT_USAGE
    folder = Path(args.folder)
    if folder.exists() and not folder.is_dir():
        print(f"csparql samples: {folder} is a file, not a folder", file=sys.stderr)
        return EXIT_USAGE
    try:
        files = write_samples(folder, hours=args.hours, format=args.format)
    except OSError as error:
        print(f"csparql samples: cannot write into {folder}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    for iri, path in sorted(files.streams.items()):
        print(f"{path}\tcsparql ingest --stream {iri} {path}")
    for iri, path in sorted(files.graphs.items(), key=lambda item: item[0] or ""):
        print(f"{path}\tcsparql load-static {path}" + (f" --graph {iri}" if iri else ""))
    return EXIT_OK
