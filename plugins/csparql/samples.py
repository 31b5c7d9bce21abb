"""Sample streams and static graphs for the example queries, generated from a seed.

The urban scenario of the papers (the C-SPARQL article, §5, and the LarKC engine design, §2): tollgates and
traffic cameras registering cars, placed in streets that belong to districts, streets with capacities and
sensors; the stock market of the engine design (§3.4 and §5.2) with its brokers; and the GetGlue interactions
of the social-data paper (§3.3) with a friendship graph. Streams are written as timestamped N-Quads (the fourth
term is the triple's xsd:dateTime, as in the social-data paper, §3.1), or as timestamped named graphs
in TriG, standard N-Quads or JSON-LD (``STREAM_FORMATS``); static graphs as Turtle.

``write_samples(folder, start, hours)`` writes one file per stream and per static graph and returns what it
wrote; the same seed always gives the same files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from csparql.storage.vocabulary import PROV_GENERATED_AT_TIME, RDF_TYPE, XSD_DATETIME, XSD_INTEGER
from csparql.core.windows import format_instant, parse_instant

C = "http://linkedurbandata.org/city#"
T = "http://linkedurbandata.org/traffic#"
B = "http://brokerscentral.org/accounts#"
X11 = "http://stockexchange.org/exchanges#"
X12 = "http://stockexchanges.org/exchanges#"
SIOC = "http://rdfs.org/sioc/ns#"
FOAF = "http://xmlns.com/foaf/0.1/"
GLUE = "http://getglue.com/user/"

STREAMS = {
    "milantollgates": "http://streams.org/milantollgates.trdf",
    "citytollgates": "http://streams.org/citytollgates.trdf",
    "citycameras": "http://streams.org/citycameras.trdf",
    "market": "http://stockexchange.org/market.trdf",
    "interactions": "http://getglue.com/interactions.trdf",
    "uctollgates": "www.uc.eu/tollgates.trdf",  # the short C-SPARQL paper's relative IRI, kept as written
}
GRAPHS = {"brokers": "http://brokerscentral.org/brokers.rdf", "friends": "http://getglue.com/friends.rdf"}
DEFAULT_START = "2010-03-22T08:00:00Z"


@dataclass
class SampleFiles:
    """The files written: each stream's N-Quads file and each static graph's Turtle file (None = default)."""

    streams: dict[str, Path] = field(default_factory=dict)
    graphs: dict[str | None, Path] = field(default_factory=dict)
    start: int = 0
    end: int = 0


def _iri(value: str) -> str:
    return f"<{value}>"


def _quad(s: str, p: str, o: str, micros: int) -> tuple[str, int]:
    return f"{s} {p} {o}", micros


STREAM_FORMATS = {"tnq": "the project's line format", "trig": "TriG timestamped named graphs",
                  "nq": "standard N-Quads timestamped named graphs", "jsonld": "JSON-LD timestamped named graphs"}
"""The formats (file extensions) the sample streams can be written in."""


def stream_text(name: str, events: list[tuple[str, int]], format: str = "tnq") -> str:
    """A sample stream's events ((statement, instant µs) in order) as the text of a file in ``format``: each
    statement with its instant as the fourth term (``tnq``), or a named graph per instant, timestamped with
    ``prov:generatedAtTime`` in the default graph (``trig``, ``nq``, ``jsonld``)."""
    if format == "tnq":
        return "".join(f'{statement} "{format_instant(at)}"^^<{XSD_DATETIME}> .\n' for statement, at in events)
    if format not in STREAM_FORMATS:
        raise ValueError(f"unknown sample format {format!r}: use one of {', '.join(STREAM_FORMATS)}")
    graphs: dict[int, list[str]] = {}
    for statement, at in events:
        graphs.setdefault(at, []).append(statement)
    trig = []
    for number, (at, statements) in enumerate(graphs.items()):
        graph = f"<urn:csparql:sample:{name}:{number}>"
        trig.append(f"{graph} {{ " + " . ".join(statements) + f" . }}\n{graph} <{PROV_GENERATED_AT_TIME}> "
                    f'"{format_instant(at)}"^^<{XSD_DATETIME}> .\n')
    text = "".join(trig)
    if format == "trig":
        return text
    import pyoxigraph as ox

    quads = ox.parse(text.encode("utf-8"), format=ox.RdfFormat.TRIG)
    target = ox.RdfFormat.N_QUADS if format == "nq" else ox.RdfFormat.JSON_LD
    return ox.serialize(quads, format=target).decode("utf-8")


@dataclass(frozen=True)
class _City:
    """The sample scenario's things, drawn once from the seed: the streets, tollgates, cameras and lights of
    the city, its cars, brokers and users."""

    streets: list[str]
    street_district: dict[str, str]
    tollgates: list[str]
    tollgate_street: dict[str, str]
    lights: list[str]
    light_street: dict[str, str]
    cameras: list[str]
    camera_light: dict[str, str]
    camera_street: dict[str, str]
    cars: list[str]
    brokers: list[str]
    users: list[str]


def _city(rng: random.Random) -> _City:
    districts = [f"{C}IT-MI-{name}" for name in ("Baggio", "Barona", "Fiera", "Brera", "Navigli")]
    streets = [f"{C}Street-{i:02d}" for i in range(20)]
    tollgates = [f"{C}T-{100 + i}" for i in range(12)]
    lights = [f"{C}Light-{i}" for i in range(8)]
    cameras = [f"{C}Camera-{i}" for i in range(16)]
    cars = [f"{C}{''.join(rng.choice('ABCDEFGH') for _ in range(2))}{rng.randint(100, 999)}{''.join(rng.choice('KLMNPQRS') for _ in range(2))}" for _ in range(300)]
    return _City(
        streets=streets,
        street_district={street: districts[i % len(districts)] for i, street in enumerate(streets)},
        tollgates=tollgates,
        tollgate_street={t: streets[(i * 3) % len(streets)] for i, t in enumerate(tollgates)},
        lights=lights,
        light_street={light: streets[(i * 5 + 1) % len(streets)] for i, light in enumerate(lights)},
        cameras=cameras,
        camera_light={camera: lights[i // 2] for i, camera in enumerate(cameras)},
        camera_street={camera: (f"{C}Oak-Avenue" if i % 2 == 0 else f"{C}Palm-Street") for i, camera in enumerate(cameras)},
        cars=cars,
        brokers=[f"{B}broker-{i}" for i in range(10)],
        users=[f"{GLUE}id{i}" for i in range(1, 30)],
    )


def _events(city: _City, rng: random.Random, begin: int, end: int, rate: int,
            after: int | None = None) -> dict[str, list[tuple[str, int]]]:
    """Each sample stream's events (statement, instant µs) at ``rate`` events per stream and minute, on the
    instants of that rate since the epoch in (begin, end]; none at or before ``after`` (each event is moved
    back by a random jitter of less than one step, and never to or before it)."""
    step = 60_000_000 // rate
    streams: dict[str, list[tuple[str, int]]] = {name: [] for name in STREAMS}
    topics = [f"http://getglue.com/topic/{t}" for t in ("movies", "music", "books", "games", "tv", "sports")]
    first = begin + step - (begin + step) % step if after is not None else begin + step
    for instant in range(first, end + 1, step):
        index = (instant - begin) // step - 1 if after is None else instant // step
        jitter = rng.randrange(0, step)
        at = instant - jitter if after is None else max(instant - jitter, after + 1)
        tollgate = rng.choice(city.tollgates)
        car = rng.choice(city.cars)
        streams["milantollgates"].append(_quad(_iri(tollgate), _iri(T + "registers"), _iri(car), at))
        gate = rng.choice(city.tollgates)
        streams["citytollgates"].append(_quad(_iri(gate), _iri(T + "registers"), _iri(rng.choice(city.cars)), at))
        # tollgates announce where they stand (read through GRAPH <stream>: the C-SPARQL article, §5.8)
        if index % 6 == 0:
            streams["citytollgates"].append(_quad(_iri(gate), _iri(C + "placedIn"), _iri(city.tollgate_street[gate]), at))
        camera = rng.choice(city.cameras)
        partner = city.cameras[city.cameras.index(camera) ^ 1]
        seen = rng.choice(city.cars)
        streams["citycameras"].append(_quad(_iri(camera), _iri(T + "registers"), _iri(seen), at))
        if rng.random() < 0.4:  # the same car seen turning by the paired camera a little later
            streams["citycameras"].append(_quad(_iri(partner), _iri(T + "registers"), _iri(seen), min(at + rng.randrange(1, 30) * 1_000_000, end)))
        if index % rate == 0:  # every minute, each camera says where it stands and what it monitors
            for each in city.cameras:
                streams["citycameras"].append(_quad(_iri(each), _iri(C + "placedAt"), _iri(city.camera_light[each]), at))
                streams["citycameras"].append(_quad(_iri(each), _iri(C + "monitors"), _iri(city.camera_street[each]), at))
            for light in city.lights:
                streams["citycameras"].append(_quad(_iri(light), _iri(C + "crossing"), _iri(city.light_street[light]), at))
        streams["uctollgates"].append(_quad(_iri(tollgate), _iri(T + "registers"), _iri(car), at))
        tx = f"http://stockexchange.org/tx/{index}"
        broker = rng.choice(city.brokers)
        amount = rng.randint(1, 40)
        streams["market"].append(_quad(_iri(broker), _iri(X11 + "does"), _iri(tx), at))
        streams["market"].append(_quad(_iri(tx), _iri(X11 + "with"), f'"{amount}"^^<{XSD_INTEGER}>', at))
        streams["market"].append(_quad(_iri(tx), _iri(X12 + "seller"), _iri(broker), at))
        streams["market"].append(_quad(_iri(tx), _iri(X12 + "with"), f'"{amount}"^^<{XSD_INTEGER}>', at))
        post = f"http://getglue.com/post/{index}"
        streams["interactions"].append(_quad(_iri(post), _iri(RDF_TYPE), _iri(SIOC + "Post"), at))
        streams["interactions"].append(_quad(_iri(post), _iri(SIOC + "has_creator"), _iri(rng.choice(city.users)), at))
        streams["interactions"].append(_quad(_iri(post), _iri(SIOC + "topic"), _iri(rng.choice(topics)), at))
    return streams


def live_sample_texts(after: int, until: int, seed: int = 2010, rate: int = 12,
                      format: str = "tnq") -> dict[str, str]:
    """The sample streams' events timestamped in (after, until] (µs; the wall clock, for a stream played
    live), as the text of one file per stream IRI in ``format`` (``stream_text``); streams without an event
    in that span are left out. The same city, cars, brokers and users as ``write_samples`` with ``seed``, so
    that the static graphs it writes hold for them; the events of each span are drawn from the seed and the
    span, and their subjects (transactions, posts) are numbered by their instant, unique across spans."""
    if format not in STREAM_FORMATS:
        raise ValueError(f"unknown sample format {format!r}: use one of {', '.join(STREAM_FORMATS)}")
    city = _city(random.Random(seed))
    events = _events(city, random.Random(f"{seed}:{after}:{until}"), after, until, rate, after=after)
    return {STREAMS[name]: stream_text(name, stream, format) for name, stream in events.items() if stream}


def write_samples(folder: str | Path, start: str = DEFAULT_START, hours: int = 3, seed: int = 2010, rate: int = 12,
                  format: str = "tnq") -> SampleFiles:
    """Write the sample streams (``rate`` events per stream and minute, in ``format``: a key of
    ``STREAM_FORMATS``) and static graphs into ``folder``."""
    if format not in STREAM_FORMATS:
        raise ValueError(f"unknown sample format {format!r}: use one of {', '.join(STREAM_FORMATS)}")
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    begin = parse_instant(start)
    end = begin + hours * 3_600_000_000
    files = SampleFiles(start=begin, end=end)
    city = _city(rng)

    # The default static graph: the city (placements, districts, capacities, sensors).
    default = [f"@prefix c: <{C}> .\n"]
    for tollgate, street in city.tollgate_street.items():
        default.append(f"<{tollgate}> c:placedIn <{street}> .\n")
    for street, district in city.street_district.items():
        default.append(f"<{district}> c:contains <{street}> .\n")
        default.append(f"<{street}> c:hasCapacity {rng.randint(2, 12)} .\n")
    for index in range(60):
        default.append(f"<{C}Sensor-{index}> c:placedIn <{city.streets[rng.randrange(8)]}> .\n")
    files.graphs[None] = folder / "city.ttl"
    files.graphs[None].write_text("".join(default), encoding="utf-8")

    brokers_graph = [f"@prefix b: <{B}> .\n"] + [f"<{b}> b:is_from \"{rng.choice(['CH', 'CH', 'IT', 'DE'])}\" .\n" for b in city.brokers]
    files.graphs[GRAPHS["brokers"]] = folder / "brokers.ttl"
    files.graphs[GRAPHS["brokers"]].write_text("".join(brokers_graph), encoding="utf-8")

    friends = [f"@prefix foaf: <{FOAF}> .\n"] + [f"<{GLUE}id1> foaf:knows <{u}> .\n" for u in city.users[1:12]]
    files.graphs[GRAPHS["friends"]] = folder / "friends.ttl"
    files.graphs[GRAPHS["friends"]].write_text("".join(friends), encoding="utf-8")

    for name, events in _events(city, rng, begin, end, rate).items():
        path = folder / f"{name}.{format}"
        path.write_text(stream_text(name, events, format), encoding="utf-8")
        files.streams[STREAMS[name]] = path
    return files
