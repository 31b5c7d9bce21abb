"""The warehouse: where each table lives under one root folder.

``Warehouse.locate()`` finds the root: the ``--warehouse`` argument, else ``CSPARQL_WAREHOUSE``, else
``delta_tables/`` in the working directory (never a folder of the installed package). The root is a local
folder or a prefix of an S3 bucket, ``s3://bucket/prefix`` (``csparql.storage.location``); any other URI is
refused (``UnsupportedLocation``), never taken for a local path. Under it::

    streams/<slug>/            one Delta table per stream IRI (output streams of REGISTER STREAM too)
    static/default/            the default static graph
    static/<slug>/             one per named static graph
    results/<query>/bindings   SELECT results of a registered query
    results/<query>/answers    ASK results
    results/<query>/triples    CONSTRUCT and DESCRIBE results
    _csparql/runs              one row per evaluation
    _csparql/statistics        per source and predicate, how many triples were loaded
    _csparql/stale_windows     windows evaluated before late triples of their streams landed
    _csparql/watermarks        per stream, how far its triples are known to have landed
    _csparql/closures          closures of static graphs, per version of the graphs (paths, entailment)
    _csparql/panes/<query>/<key>  partial results of a query's panes, one table per pane plan
    _csparql/query_facts       what compiling each registry file told (``csparql.deploy.registry``), by content

A slug is readable and unique: the IRI without its scheme, with unsafe characters replaced, and a short hash.
Every table also records its IRI in its Delta metadata (``csparql.iri``), so the mapping can be read back.

SQL (``csparql sql``, delta-rs) knows tables by lower-case names only: the results of query ``Q`` as ``q``,
``q_answers`` and ``q_triples`` (``sql_table_names``), the warehouse's own tables as ``runs``, ``statistics``,
``stale_windows`` (and, kept for them, ``watermarks`` and ``closures``; ``panes`` and ``query_facts`` too, and
SQL's own ``datafusion``, ``public`` and ``information_schema``: ``RESERVED_NAMES``), streams and
static graphs as ``stream_…`` and ``static_…``. So a query name must not reach any of those
(``reserved_name_problem``) nor share a result
table name with another query spelled differently (``name_collision``): ``CaseQ`` and ``caseq``, or ``a`` and
``a_answers``, would make one query's results unreachable.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from rdflib import URIRef

from csparql.storage import tables
from csparql.storage.location import ObjectPath, check_reachable, location
from csparql.storage.tables import RESULT_KINDS

ENVIRONMENT_VARIABLE = "CSPARQL_WAREHOUSE"
OUTPUT_STREAM_PREFIX = "urn:csparql:stream:"
QUERY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
RESERVED_NAMES = tables.RESERVED_NAMES
"""The names no query's SQL result table may take, with what each names (``csparql.storage.tables``): the
warehouse's own tables (SQL shows runs, statistics and stale_windows; the others are kept, so that showing them
later hides no query's results), its other internal folders, and SQL's catalog and schema names."""
SYSTEM_PREFIXES = ("stream_", "static_")
"""The SQL names of stream and static-graph tables start with these."""


def slug(iri: str) -> str:
    """A folder name for an IRI: readable, filesystem-safe, and unique thanks to a short hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", iri.split("://", 1)[-1]).strip("_.")[:60] or "iri"
    digest = hashlib.sha1(iri.encode("utf-8")).hexdigest()[:8]
    return f"{readable}-{digest}"


def output_stream_iri(query_name: str) -> URIRef:
    """The IRI of the stream a ``REGISTER STREAM name`` query produces (docs/semantics.md, *Output streams*)."""
    return URIRef(OUTPUT_STREAM_PREFIX + query_name)


def default_query_name(source: str) -> str:
    """The name of an unregistered query read from a file: the file's stem, made a valid name."""
    stem = re.sub(r"[^A-Za-z0-9_\-]", "_", Path(source).stem) or "query"
    return stem if re.match(r"[A-Za-z_]", stem) else f"q_{stem}"


IRI_TEXT = re.compile(r"[^\s<>\"{}|^`\\]+")
"""An IRI as a stream or graph is named on the command line: no spaces, none of <>"{}|^`\\. Relative IRIs count,
since a query without BASE keeps them as written (docs/semantics.md, *Spellings*), e.g.
``www.uc.eu/tollgates.trdf``."""


def _unbracketed(text: str) -> str:
    """``text`` without surrounding spaces and, when written ``<...>``, its angle brackets."""
    iri = text.strip()
    return iri[1:-1] if iri.startswith("<") and iri.endswith(">") else iri


def iri_problem(text: str, what: str) -> str | None:
    """Why ``text`` (``<...>`` accepted) cannot name a ``what`` (a stream, a graph) by its IRI, or None."""
    if IRI_TEXT.fullmatch(_unbracketed(text)):
        return None
    return (f"the {what} '{text}' is not an IRI: it must not be empty or contain spaces or any of <>\"{{}}|^`\\ "
            "(e.g. http://example.org/stream)")


NEW_STREAM_IRI = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s<>\"{}|^`\\]+|urn:[A-Za-z0-9][A-Za-z0-9-]*:)"
                            r"[^\s<>\"{}|^`\\]*", re.IGNORECASE)
"""The IRI a stream is created under by a push or ``csparql watermark --create``: absolute, with a scheme and
an authority (``http://example.org/stream``) or a URN (``urn:example:stream``)."""


def new_stream_problem(text: str) -> str | None:
    """Why ``text`` (``<...>`` accepted) cannot name a stream created by hand (``NEW_STREAM_IRI``), or None."""
    problem = iri_problem(text, "stream")
    if problem is not None:
        return problem
    if NEW_STREAM_IRI.fullmatch(_unbracketed(text)):
        return None
    return (f"'{text}' cannot name a new stream: give an absolute IRI with a scheme and an authority (e.g. "
            "http://example.org/stream) or a URN (e.g. urn:example:stream)")


class InvalidName(ValueError):
    """A query name that cannot name tables and folders."""


def check_query_name(name: str) -> str:
    """The name itself when it is a valid query name (letters, digits, '_' and '-'; no path tricks)."""
    if not QUERY_NAME.fullmatch(name or ""):
        raise InvalidName(
            f"'{name}' is not a valid query name: use letters, digits, '_' and '-', starting with a letter or '_'"
        )
    return name


def sql_table_name(query_name: str, kind: str) -> str:
    """The name SQL knows one result table of a query by: the query's name for SELECT bindings,
    ``<name>_answers`` for ASK and ``<name>_triples`` for CONSTRUCT and DESCRIBE, in lower case."""
    if kind not in RESULT_KINDS:
        raise ValueError(f"unknown result table kind {kind!r}")
    return (query_name if kind == "bindings" else f"{query_name}_{kind}").lower()


def sql_table_names(query_name: str) -> tuple[str, ...]:
    """Every name SQL may know a query's results by (an edit can change its form, so all three kinds)."""
    return tuple(sql_table_name(query_name, kind) for kind in RESULT_KINDS)


def reserved_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a query because SQL would confuse its results with one of the warehouse's own
    tables or folders, or with SQL's catalog and schema names (``RESERVED_NAMES``, ``SYSTEM_PREFIXES``), or
    None when it can."""
    lowered = name.lower()
    for table in sql_table_names(name):
        if table in RESERVED_NAMES:
            return (f"'{name}' cannot name a query: its results would be the SQL table {table}, which is "
                    f"{RESERVED_NAMES[table]}; the name is reserved (SQL compares table names in lower case); "
                    "choose another name")
    if lowered.startswith(SYSTEM_PREFIXES):
        return (f"'{name}' cannot name a query: names starting with {' or '.join(SYSTEM_PREFIXES)} (in any case) "
                "are kept for the SQL tables of streams and static graphs; choose another name")
    return None


def name_collision(name: str, others: Iterable[str]) -> tuple[str, str] | None:
    """The first of ``others`` spelled differently from ``name`` whose SQL result tables share a name with
    ``name``'s (``CaseQ`` and ``caseq``; ``a_answers`` and ``a``, whose ASK results are ``a_answers``), with
    that table name; None when there is none. The same spelling is the same query, never a collision."""
    mine = set(sql_table_names(name))
    for other in others:
        if other == name:
            continue
        shared = [table for table in sql_table_names(other) if table in mine]
        if shared:
            return other, shared[0]
    return None


def collision_message(name: str, other: str, table: str, described_other: str) -> str:
    """The one-line refusal of ``name`` because of ``name_collision``'s (``other``, ``table``)."""
    return (f"'{name}' collides with {described_other}: SQL knows tables by lower-case names only, so both "
            f"would have the result table {table}; choose another name")


class NameCollision(InvalidName):
    """A query name whose SQL tables would collide with the warehouse's own tables or another query's."""


class Warehouse:
    """The folder (local, or an S3 prefix) holding every table, with the path of each kind of table."""

    def __init__(self, root: str | os.PathLike | ObjectPath):
        self.root = location(root)

    @property
    def remote(self) -> bool:
        """Whether the warehouse lies in an object store rather than on this machine's disk."""
        return isinstance(self.root, ObjectPath)

    def check_reachable(self) -> Warehouse:
        """The warehouse itself when its store answers (always, for a local folder); ``StorageUnreachable``
        in one line when its endpoint, bucket or credentials cannot be used."""
        check_reachable(self.root)
        return self

    @classmethod
    def locate(cls, root: str | os.PathLike | None = None) -> Warehouse:
        """The warehouse at ``root``, else at ``$CSPARQL_WAREHOUSE``, else ``delta_tables/`` in the working
        directory."""
        if root:
            return cls(root)
        if os.environ.get(ENVIRONMENT_VARIABLE):
            return cls(os.environ[ENVIRONMENT_VARIABLE])
        return cls(Path.cwd() / "delta_tables")

    def __repr__(self) -> str:
        return f"Warehouse({str(self.root)!r})"

    def stream(self, iri: str) -> Path | ObjectPath:
        return self.root / "streams" / slug(str(iri))

    def static(self, iri: str | None) -> Path:
        return self.root / "static" / ("default" if iri is None else slug(str(iri)))

    def results(self, query_name: str, kind: str) -> Path:
        if kind not in RESULT_KINDS:
            raise ValueError(f"unknown result table kind {kind!r}")
        return self.root / "results" / check_query_name(query_name) / kind

    @property
    def panes_root(self) -> Path:
        """The folder of every query's pane tables."""
        return self.root / tables.INTERNAL_FOLDERS["panes"]

    def panes(self, query_name: str) -> Path:
        """The folder of a query's pane tables (``csparql.engine.panes``): one table per pane plan under it."""
        return self.panes_root / check_query_name(query_name)

    @property
    def runs(self) -> Path:
        return self.root / tables.RUNS.folder

    @property
    def stale_windows(self) -> Path:
        """Windows evaluated before late triples of their streams landed (``csparql.storage.stale_windows``)."""
        return self.root / tables.STALE_WINDOWS.folder

    @property
    def statistics(self) -> Path:
        return self.root / tables.STATISTICS.folder

    @property
    def watermarks(self) -> Path:
        return self.root / tables.WATERMARKS.folder

    @property
    def closures(self) -> Path:
        return self.root / tables.CLOSURES.folder

    @property
    def query_facts(self) -> Path:
        """The folder of the registry's compile cache (JSON files, not a table; ``csparql.deploy.registry``)."""
        return self.root / tables.INTERNAL_FOLDERS["query_facts"]

    def stream_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "streams").glob("*") if (p / "_delta_log").is_dir())

    def static_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "static").glob("*") if (p / "_delta_log").is_dir())

    def result_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "results").glob("*/*") if (p / "_delta_log").is_dir())

    def result_names(self) -> list[str]:
        """The names of the queries with stored results, in name order."""
        return sorted({folder.parent.name for folder in self.result_folders()})

    def check_new_results(self, name: str) -> str:
        """``name`` itself when results may be written under it: a valid query name that neither reaches a
        table name kept for the warehouse nor collides, in SQL, with the stored results of another query;
        ``InvalidName`` (``NameCollision``) saying with what otherwise."""
        check_query_name(name)
        problem = reserved_name_problem(name)
        if problem is None:
            collision = name_collision(name, self.result_names())
            if collision is not None:
                other, table = collision
                problem = collision_message(name, other, table, f"the stored results of the query {other} "
                                                                 f"({self.root / 'results' / other})")
        if problem is not None:
            raise NameCollision(problem)
        return name
