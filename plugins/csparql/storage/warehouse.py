"""The warehouse: where each table lives under one root folder.

``Warehouse.locate()`` finds the root: the ``--warehouse`` argument, else ``CSPARQL_WAREHOUSE``, else the
project's ``delta_tables/`` folder. Under it::

    streams/<slug>/            one Delta table per stream IRI (output streams of REGISTER STREAM too)
    static/default/            the default static graph
    static/<slug>/             one per named static graph
    results/<query>/bindings   SELECT results of a registered query
    results/<query>/answers    ASK results
    results/<query>/triples    CONSTRUCT and DESCRIBE results
    _csparql/runs              one row per evaluation
    _csparql/statistics        per source and predicate, how many triples were loaded
    _csparql/watermarks        per stream, how far its triples are known to have landed
    _csparql/closures          closures of static graphs, per version of the graphs (paths, entailment)

A slug is readable and unique: the IRI without its scheme, with unsafe characters replaced, and a short hash.
Every table also records its IRI in its Delta metadata (``csparql.iri``), so the mapping can be read back.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from rdflib import URIRef

ENVIRONMENT_VARIABLE = "CSPARQL_WAREHOUSE"
OUTPUT_STREAM_PREFIX = "urn:csparql:stream:"
QUERY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def project_root() -> Path:
    """The repository root when csparql runs from a checkout (plugins/csparql/… two levels up)."""
    return Path(__file__).resolve().parents[3]


def slug(iri: str) -> str:
    """A folder name for an IRI: readable, filesystem-safe, and unique thanks to a short hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", iri.split("://", 1)[-1]).strip("_.")[:60] or "iri"
    digest = hashlib.sha1(iri.encode("utf-8")).hexdigest()[:8]
    return f"{readable}-{digest}"


def output_stream_iri(query_name: str) -> URIRef:
    """The IRI of the stream a ``REGISTER STREAM name`` query produces (decision 10)."""
    return URIRef(OUTPUT_STREAM_PREFIX + query_name)


def default_query_name(source: str) -> str:
    """The name of an unregistered query read from a file: the file's stem, made a valid name."""
    stem = re.sub(r"[^A-Za-z0-9_\-]", "_", Path(source).stem) or "query"
    return stem if re.match(r"[A-Za-z_]", stem) else f"q_{stem}"


class InvalidName(ValueError):
    """A query name that cannot name tables and folders."""


def check_query_name(name: str) -> str:
    """The name itself when it is a valid query name (letters, digits, '_' and '-'; no path tricks)."""
    if not QUERY_NAME.fullmatch(name or ""):
        raise InvalidName(
            f"'{name}' is not a valid query name: use letters, digits, '_' and '-', starting with a letter or '_'"
        )
    return name


class Warehouse:
    """The folder holding every table, with the path of each kind of table."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()

    @classmethod
    def locate(cls, root: str | os.PathLike | None = None) -> Warehouse:
        """The warehouse at ``root``, else at ``$CSPARQL_WAREHOUSE``, else the project's ``delta_tables/``."""
        if root:
            return cls(root)
        if os.environ.get(ENVIRONMENT_VARIABLE):
            return cls(os.environ[ENVIRONMENT_VARIABLE])
        checkout = project_root() / "delta_tables"
        return cls(checkout if checkout.parent.joinpath("pyproject.toml").exists() else Path.cwd() / "delta_tables")

    def __repr__(self) -> str:
        return f"Warehouse({str(self.root)!r})"

    def stream(self, iri: str) -> Path:
        return self.root / "streams" / slug(str(iri))

    def static(self, iri: str | None) -> Path:
        return self.root / "static" / ("default" if iri is None else slug(str(iri)))

    def results(self, query_name: str, kind: str) -> Path:
        if kind not in ("bindings", "answers", "triples"):
            raise ValueError(f"unknown result table kind {kind!r}")
        return self.root / "results" / check_query_name(query_name) / kind

    @property
    def runs(self) -> Path:
        return self.root / "_csparql" / "runs"

    @property
    def statistics(self) -> Path:
        return self.root / "_csparql" / "statistics"

    @property
    def watermarks(self) -> Path:
        return self.root / "_csparql" / "watermarks"

    @property
    def closures(self) -> Path:
        return self.root / "_csparql" / "closures"

    def stream_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "streams").glob("*") if (p / "_delta_log").is_dir())

    def static_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "static").glob("*") if (p / "_delta_log").is_dir())

    def result_folders(self) -> list[Path]:
        return sorted(p for p in (self.root / "results").glob("*/*") if (p / "_delta_log").is_dir())
