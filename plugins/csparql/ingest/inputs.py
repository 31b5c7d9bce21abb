"""What an ingest is asked to read and what it reports: its inputs, formats and reports, shared by the request
checks (``csparql.ingest.ingest``) and the jobs that parse and stage (``csparql.ingest.job``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from csparql.ingest.parsers import graphs
from csparql.core.windows import format_instant

LINE_FORMATS = ("ntriples", "nquads")
QUAD_FORMATS = ("nquads", "trig", "trix", "json-ld", graphs.GRAPH_NQUADS)
GRAPH_FORMATS = ("trig", "trix", "json-ld", graphs.GRAPH_NQUADS)  # a stream's file in these: timestamped graphs
BATCH_SHIFT = 40
"""``arrival = batch << BATCH_SHIFT | ordinal`` (see ``csparql.ingest.ingest``, "Arrival order")."""
MAX_BATCH = (1 << (63 - BATCH_SHIFT)) - 1
SHOWN_REJECTS = 10
"""How many rejects a report shows (all of them are in the rejects files)."""
MEDIA_TYPES = {
    "application/trig": "trig",
    "application/n-quads": "nquads",
    "application/ld+json": "json-ld",
    "application/trix": "trix",
    "application/n-triples": "ntriples",
    "text/turtle": "turtle",
}
"""The media types a pushed body or a message may have, and the ingest format each is read as
(``application/n-quads``: standard N-Quads of timestamped graphs or the project's line format, told apart as a
file's are)."""
FORMAT_EXTENSIONS = {"trig": ".trig", "nquads": ".nq", "json-ld": ".jsonld", "trix": ".trix", "ntriples": ".nt",
                     "turtle": ".ttl"}
"""The file name ending of each format of ``MEDIA_TYPES`` (a body saved to a file keeps its format)."""


def media_type_format(content_type: str | None) -> str | None:
    """The ingest format of a ``Content-Type`` (its parameters, such as ``charset``, aside), None for a media
    type not in ``MEDIA_TYPES``."""
    return MEDIA_TYPES.get((content_type or "").split(";", 1)[0].strip().lower())


class InputError(Exception):
    """The command was used wrongly (a missing or unreadable file, an unknown format, a bad option): nothing
    was read or written."""


@dataclass(frozen=True)
class Reject:
    """One rejected line (or file, for formats parsed whole): fields as written in the rejects file."""

    file: str
    line: int
    reason: str
    text: str


@dataclass
class IngestReport:
    """What one ingest or static load did."""

    target: str  # the stream IRI, the graph IRI, or "" for the default graph
    table: Path
    landed: int = 0  # triples committed
    rejected: int = 0  # rejected lines (a file rdflib could not parse counts once)
    files: int = 0  # input files read
    rejects_paths: tuple[Path, ...] = ()
    min_ts: int | None = None  # microseconds, of the triples landed (streams)
    max_ts: int | None = None  # the stream's watermark after this ingest
    data_files: int = 0  # Parquet files committed
    version: int | None = None  # the table version committed (None: nothing to commit)
    counts: dict[str, int] = field(default_factory=dict)  # triples landed per predicate
    first_rejects: list[Reject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    already_landed: Landed | None = None  # the commit that landed the same content before: nothing landed now

    @property
    def rejects_path(self) -> Path | None:
        return self.rejects_paths[0] if self.rejects_paths else None

    @property
    def watermark(self) -> int | None:
        return self.max_ts


@dataclass(frozen=True)
class Landed:
    """A commit that landed some content: its table version, when it was committed (µs) and, for a stream,
    the watermark its ingest advances the stream to (None when the commit does not say)."""

    version: int
    committed_at: int
    watermark: int | None = None

    def describe(self) -> str:
        return f"version {self.version} at {format_instant(self.committed_at)}"


@dataclass(frozen=True)
class Input:
    index: int
    path: Path  # resolved
    format: str  # a FORMAT_NAMES value
    name: str = ""  # as given, for messages

    @property
    def line_based(self) -> bool:
        return self.format in LINE_FORMATS

