"""Seeded data at any size, landed through the product's own paths.

Each data set is a warehouse of its own holding the streams and static graph one workload reads, generated
from a seed so that the same seed and size always give the same files:

- ``urban``: the tollgate stream of the examples (``t:registers`` triples, tollgate → car) and the static
  city graph (tollgate ``c:placedIn`` street, district ``c:contains`` street), as in the C-SPARQL article and the LarKC engine design;
- ``topics``: the GetGlue interactions of the social-data paper (each post: ``rdf:type``, ``sioc:has_creator``,
  ``sioc:topic``);
- ``two_streams``: the tollgate and camera streams of the C-SPARQL article, §5.8, each carrying the placement facts the query
  reads through ``GRAPH <stream>``, and street capacities in the static graph.

Streams are written as timestamped N-Quads (the fourth term is the triple's xsd:dateTime, the social-data paper) and
landed with ``ingest_stream``; the static graph is written as N-Triples and landed with ``load_static``.
A data set of window size ``n`` and history ``h`` holds ``h`` windows' worth of stream, ``n`` triples per
window length, evenly spread (with jitter) over ``(at − h·range, at]``: the window ending at ``at`` holds
``n`` triples (a few fewer once duplicates collapse into one triple, the window being a set).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from csparql.storage.vocabulary import RDF_TYPE, XSD_DATETIME, XSD_INTEGER
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import from_micros, parse_instant

C = "http://linkedurbandata.org/city#"
T = "http://linkedurbandata.org/traffic#"
SIOC = "http://rdfs.org/sioc/ns#"

MILAN_TOLLGATES = "http://streams.org/milantollgates.trdf"
CITY_TOLLGATES = "http://streams.org/citytollgates.trdf"
CITY_CAMERAS = "http://streams.org/citycameras.trdf"
INTERACTIONS = "http://getglue.com/interactions.trdf"

AT = parse_instant("2010-03-22T12:00:00Z")
"""The evaluation instant of every benchmark window: a multiple of every STEP used (6 s … 30 min)."""
SECOND = 1_000_000
MINUTE = 60 * SECOND

# The city: small static knowledge, as in the examples (a few hundred triples).
TOLLGATES = 120
STREETS = 300
DISTRICTS = 15
CAMERAS = 40
LIGHTS = 20


@dataclass(frozen=True)
class City:
    """The static city of a seed: where each tollgate, camera and light stands, which district holds each
    street, and each street's capacity."""

    tollgate_street: dict[str, str]
    street_district: dict[str, str]
    camera_light: dict[str, str]
    light_street: dict[str, str]
    capacity: dict[str, int]

    @classmethod
    def of(cls, seed: int, expected_per_street: int = 10) -> City:
        rng = random.Random(seed)
        streets = [f"{C}Street-{i:03d}" for i in range(STREETS)]
        districts = [f"{C}District-{i:02d}" for i in range(DISTRICTS)]
        tollgates = [f"{C}T-{1000 + i}" for i in range(TOLLGATES)]
        lights = [f"{C}Light-{i:02d}" for i in range(LIGHTS)]
        cameras = [f"{C}Camera-{i:02d}" for i in range(CAMERAS)]
        # Capacities straddle the expected count so that the FILTER of 08 keeps some streets, drops others.
        top = max(2, int(2.5 * expected_per_street))
        return cls(
            tollgate_street={t: rng.choice(streets) for t in tollgates},
            street_district={s: districts[i % DISTRICTS] for i, s in enumerate(streets)},
            camera_light={c: lights[i // 2] for i, c in enumerate(cameras)},
            light_street={light: rng.choice(streets) for light in lights},
            capacity={s: rng.randint(1, top) for s in streets},
        )

    def static_lines(self) -> list[str]:
        """The default static graph in N-Triples: placements, districts and capacities."""
        lines = [f"<{t}> <{C}placedIn> <{s}> .\n" for t, s in self.tollgate_street.items()]
        lines += [f"<{d}> <{C}contains> <{s}> .\n" for s, d in self.street_district.items()]
        lines += [f'<{s}> <{C}hasCapacity> "{c}"^^<{XSD_INTEGER}> .\n' for s, c in self.capacity.items()]
        return lines


class _Instants:
    """xsd:dateTime lexical forms of microsecond instants, fast (the second's text is cached)."""

    def __init__(self):
        self._second = None
        self._text = ""

    def __call__(self, micros: int) -> str:
        second, fraction = divmod(micros, SECOND)
        if second != self._second:
            self._second = second
            self._text = from_micros(second * SECOND).strftime("%Y-%m-%dT%H:%M:%S")
        return f'"{self._text}.{fraction:06d}Z"^^<{XSD_DATETIME}>'


def spread(rng: random.Random, start: int, end: int, count: int) -> Iterator[int]:
    """``count`` instants in (start, end], in order, evenly spaced with jitter inside each slot."""
    if count <= 0:
        return
    slot = (end - start) / count
    for i in range(count):
        low = start + int(i * slot)
        high = start + int((i + 1) * slot)
        yield min(end, max(low + 1, high - rng.randrange(max(1, high - low))))


@dataclass
class Ingested:
    """One landed stream file: how many triples, how long the ingest took, in which format and how (``spark``:
    ``ingest_stream`` with Spark, the data set's own landing; ``in-process``: without Spark, as pushes and
    message batches land)."""

    stream: str
    triples: int
    bytes: int
    seconds: float
    format: str = "timestamped N-Quads"
    path: str = "spark"

    @property
    def triples_per_second(self) -> float:
        return self.triples / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Dataset:
    """A warehouse holding one workload's data, and what landing it cost."""

    kind: str
    size: int  # triples per window length
    history: int  # windows' worth of stream stored
    range_micros: int
    warehouse: Warehouse
    at: int = AT
    seed: int = 0
    ingests: list[Ingested] = field(default_factory=list)
    generated: dict[str, int] = field(default_factory=dict)  # triples written per stream

    @property
    def start(self) -> int:
        return self.at - self.history * self.range_micros


def _write_registrations(path: Path, rng: random.Random, city: City, start: int, end: int, count: int) -> int:
    instant = _Instants()
    tollgates = list(city.tollgate_street)
    cars = max(100, count // 3)
    registers = f"<{T}registers>"
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        lines = []
        for tau in spread(rng, start, end, count):
            lines.append(f"<{rng.choice(tollgates)}> {registers} <{C}CAR{rng.randrange(cars):07d}> {instant(tau)} .\n")
            if len(lines) >= 100_000:
                out.writelines(lines)
                lines.clear()
        out.writelines(lines)
    return count


def _write_topics(path: Path, rng: random.Random, start: int, end: int, count: int) -> int:
    """Posts of three triples each (type, creator, topic), the three with the post's instant."""
    instant = _Instants()
    topics = [f"http://getglue.com/topic/{i:03d}" for i in range(60)]
    users = max(50, count // 20)
    written = 0
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        lines = []
        for index, tau in enumerate(spread(rng, start, end, count // 3)):
            post = f"<http://getglue.com/post/{start // SECOND}-{index:09d}>"
            at = instant(tau)
            lines.append(f"{post} <{RDF_TYPE}> <{SIOC}Post> {at} .\n")
            lines.append(f"{post} <{SIOC}has_creator> <http://getglue.com/user/id{rng.randrange(users)}> {at} .\n")
            lines.append(f"{post} <{SIOC}topic> <{rng.choice(topics)}> {at} .\n")
            written += 3
            if len(lines) >= 100_000:
                out.writelines(lines)
                lines.clear()
        out.writelines(lines)
    return written


def _write_city_tollgates(path: Path, rng: random.Random, city: City, start: int, end: int, count: int) -> int:
    """Registrations, and every tollgate announcing where it stands once a minute (read through GRAPH)."""
    instant = _Instants()
    tollgates = list(city.tollgate_street)
    announcements = []
    minute = start - start % MINUTE + MINUTE
    while minute <= end:
        announcements += [(minute, f"<{t}> <{C}placedIn> <{s}>") for t, s in city.tollgate_street.items()]
        minute += MINUTE
    registrations = max(0, count - len(announcements))
    cars = max(100, registrations // 3)
    events = [(tau, f"<{rng.choice(tollgates)}> <{T}registers> <{C}CAR{rng.randrange(cars):07d}>")
              for tau in spread(rng, start, end, registrations)]
    events += announcements
    events.sort(key=lambda e: e[0])
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        out.writelines(f"{triple} {instant(tau)} .\n" for tau, triple in events)
    return len(events)


def _write_cameras(path: Path, rng: random.Random, city: City, start: int, end: int, count: int) -> int:
    """Cameras registering cars, each camera's light and each light's crossing announced once a minute."""
    instant = _Instants()
    cameras = list(city.camera_light)
    announcements = []
    minute = start - start % MINUTE + MINUTE
    while minute <= end:
        announcements += [(minute, f"<{c}> <{C}placedAt> <{light}>") for c, light in city.camera_light.items()]
        announcements += [(minute, f"<{light}> <{C}crossing> <{s}>") for light, s in city.light_street.items()]
        minute += MINUTE
    registrations = max(0, count - len(announcements))
    cars = max(100, registrations // 3)
    events = [(tau, f"<{rng.choice(cameras)}> <{T}registers> <{C}CAR{rng.randrange(cars):07d}>")
              for tau in spread(rng, start, end, registrations)]
    events += announcements
    events.sort(key=lambda e: e[0])
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        out.writelines(f"{triple} {instant(tau)} .\n" for tau, triple in events)
    return len(events)


RANGES = {"urban": 30 * MINUTE, "topics": 3 * MINUTE, "two_streams": 5 * MINUTE}
"""The window length each data set is sized for: 04/07 `[RANGE 30m]`, 15 `[RANGE 3m]`, 08 `[RANGE 5m]`."""


def generate(kind: str, folder: Path, size: int, history: int,
             seed: int) -> tuple[dict[str, Path], Path, dict[str, int], int]:
    """Write the stream files and the static graph of a data set into ``folder``: (stream IRI → file, static
    file, triples per stream, range). ``size`` triples per window length, ``history`` window lengths."""
    if kind not in RANGES:
        raise ValueError(f"unknown data set {kind!r}: use one of {', '.join(RANGES)}")
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}/{kind}/{size}/{history}")
    span = RANGES[kind]
    start, end = AT - history * span, AT
    total = size * history
    per_street = max(1, (size // 2) // STREETS) if kind == "two_streams" else 10
    city = City.of(seed, expected_per_street=per_street)
    streams: dict[str, Path] = {}
    counts: dict[str, int] = {}
    if kind == "urban":
        streams[MILAN_TOLLGATES] = folder / "tollgates.nq"
        counts[MILAN_TOLLGATES] = _write_registrations(streams[MILAN_TOLLGATES], rng, city, start, end, total)
    elif kind == "topics":
        streams[INTERACTIONS] = folder / "interactions.nq"
        counts[INTERACTIONS] = _write_topics(streams[INTERACTIONS], rng, start, end, total)
    else:
        streams[CITY_TOLLGATES] = folder / "citytollgates.nq"
        counts[CITY_TOLLGATES] = _write_city_tollgates(streams[CITY_TOLLGATES], rng, city, start, end, total // 2)
        streams[CITY_CAMERAS] = folder / "citycameras.nq"
        counts[CITY_CAMERAS] = _write_cameras(streams[CITY_CAMERAS], rng, city, start, end, total - total // 2)
    static = folder / "city.nt"
    static.write_text("".join(city.static_lines()), encoding="utf-8")
    return streams, static, counts, span


def build(spark, kind: str, root: Path, size: int, history: int, seed: int) -> Dataset:
    """Generate a data set and land it in a new warehouse under ``root`` through ``ingest_stream`` and
    ``load_static``; each stream ingest is timed (the ingest throughput figures)."""
    from csparql.ingest.ingest import ingest_stream, load_static

    folder = root / f"{kind}-n{size}-h{history}"
    files, static, counts, span = generate(kind, folder / "input", size, history, seed)
    warehouse = Warehouse(folder / "warehouse")
    dataset = Dataset(kind, size, history, span, warehouse, seed=seed, generated=counts)
    load_static(spark, warehouse, None, [static], replace=True)
    for iri, path in files.items():
        clock = time.perf_counter()
        report = ingest_stream(spark, warehouse, iri, [path])
        seconds = time.perf_counter() - clock
        if report.rejected:
            raise RuntimeError(f"{path}: {report.rejected} generated line(s) were rejected: {report.first_rejects[:3]}")
        dataset.ingests.append(Ingested(iri, report.landed, path.stat().st_size, seconds))
    largest = max(files, key=lambda iri: counts[iri])
    dataset.ingests += formats_side_by_side(largest, files[largest], folder / "formats")
    return dataset


def as_timestamped_graphs(lines: Path, trig: Path) -> None:
    """The stream file ``lines`` (the line format, as ``generate`` writes it) as TriG timestamped named graphs:
    one graph per instant, its timestamp a ``prov:generatedAtTime`` triple in the default graph."""
    graphs: dict[str, list[str]] = {}
    with open(lines, encoding="utf-8") as handle:
        for line in handle:
            statement, _, timestamp = line.rstrip().removesuffix(" .").rpartition(" ")
            if statement:
                graphs.setdefault(timestamp, []).append(statement)
    with open(trig, "w", encoding="utf-8") as out:
        out.write("@prefix prov: <http://www.w3.org/ns/prov#> .\n")
        for number, (timestamp, statements) in enumerate(graphs.items()):
            name = f"<urn:event:{number}>"
            out.write(f"{name} {{ " + " . ".join(statements) + f" . }}\n{name} prov:generatedAtTime {timestamp} .\n")


def formats_side_by_side(iri: str, lines: Path, folder: Path) -> list[Ingested]:
    """The same events landed without Spark (``in_process``) from the line format and from TriG timestamped
    named graphs, one after the other into fresh warehouses: the ingest figures of the two formats."""
    from csparql.ingest.ingest import ingest_stream

    folder.mkdir(parents=True, exist_ok=True)
    trig = folder / "events.trig"
    as_timestamped_graphs(lines, trig)
    measured = []
    for name, path in (("timestamped N-Quads", lines), ("TriG timestamped graphs", trig)):
        clock = time.perf_counter()
        report = ingest_stream(None, Warehouse(folder / f"warehouse-{path.suffix[1:]}"), iri, [path], in_process=True)
        seconds = time.perf_counter() - clock
        if report.rejected:
            raise RuntimeError(f"{path}: {report.rejected} rejected: {report.first_rejects[:3]}")
        measured.append(Ingested(iri, report.landed, path.stat().st_size, seconds, name, "in-process"))
    return measured


SRBENCH_HOURS = 30
"""Hours of SRBench observations: the scenario the tests check the queries on (``tests/srbench``)."""


def build_srbench(spark, root: Path, stations: int, rate: int, seed: int) -> tuple[Dataset, object]:
    """SRBench data (SRBench, §4) of ``stations`` weather stations sampling every property ``rate`` times an hour
    over ``SRBENCH_HOURS`` hours, landed in a new warehouse under ``root`` through the product's own ingest
    and load paths (``csparql.srbench.generate_workload``; not an ingest figure: that call also generates the
    data and loads the static graphs). Returns the data set (its ``size``: stream
    triples per hour, its ``history``: the hours) and the generated ``SRBenchData``."""
    from csparql.srbench import Size, generate_workload
    from csparql.srbench.vocabulary import OBSERVATIONS

    folder = root / f"srbench-s{stations}-r{rate}"
    warehouse = Warehouse(folder / "warehouse")
    loaded = generate_workload(warehouse, Size(stations=stations, hours=SRBENCH_HOURS, rate=rate), seed,
                               folder=folder / "input", spark=spark)
    rejected = sum(report.rejected for report in loaded.reports)
    if rejected:
        raise RuntimeError(f"SRBench data: {rejected} generated line(s) were rejected")
    triples = len(loaded.data.stream)
    dataset = Dataset("srbench", triples // SRBENCH_HOURS, SRBENCH_HOURS, 60 * MINUTE, warehouse, seed=seed,
                      generated={str(OBSERVATIONS): triples})
    return dataset, loaded.data
