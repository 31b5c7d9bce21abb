"""Sample streams and static graphs for the example queries, generated from a seed.

The urban scenario of the papers (000 §5, 002 §2): tollgates and traffic cameras registering cars, placed in
streets that belong to districts, streets with capacities and sensors; the stock market of 002 §3.4 and
§5.2 with its brokers; and the GetGlue interactions of 003 §3.3 with a friendship graph. Streams are written
as timestamped N-Quads (the fourth term is the triple's xsd:dateTime, 003 §3.1), or as timestamped named graphs
in TriG, standard N-Quads or JSON-LD (``STREAM_FORMATS``); static graphs as Turtle.

``write_samples(folder, start, hours)`` writes one file per stream and per static graph and returns what it
wrote; the same seed always gives the same files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from csparql.storage.vocabulary import PROV_GENERATED_AT_TIME, RDF_TYPE, XSD_DATETIME, XSD_INTEGER
from csparql.windows import format_instant, parse_instant

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
    "uctollgates": "www.uc.eu/tollgates.trdf",  # the relative stream IRI of 001, kept as written (decision 5)
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

    districts = [f"{C}IT-MI-{name}" for name in ("Baggio", "Barona", "Fiera", "Brera", "Navigli")]
    streets = [f"{C}Street-{i:02d}" for i in range(20)]
    street_district = {street: districts[i % len(districts)] for i, street in enumerate(streets)}
    tollgates = [f"{C}T-{100 + i}" for i in range(12)]
    tollgate_street = {t: streets[(i * 3) % len(streets)] for i, t in enumerate(tollgates)}
    lights = [f"{C}Light-{i}" for i in range(8)]
    light_street = {light: streets[(i * 5 + 1) % len(streets)] for i, light in enumerate(lights)}
    cameras = [f"{C}Camera-{i}" for i in range(16)]
    camera_light = {camera: lights[i // 2] for i, camera in enumerate(cameras)}
    camera_street = {camera: (f"{C}Oak-Avenue" if i % 2 == 0 else f"{C}Palm-Street") for i, camera in enumerate(cameras)}
    cars = [f"{C}{''.join(rng.choice('ABCDEFGH') for _ in range(2))}{rng.randint(100, 999)}{''.join(rng.choice('KLMNPQRS') for _ in range(2))}" for _ in range(300)]

    # The default static graph: the city (placements, districts, capacities, sensors).
    default = [f"@prefix c: <{C}> .\n"]
    for tollgate, street in tollgate_street.items():
        default.append(f"<{tollgate}> c:placedIn <{street}> .\n")
    for street, district in street_district.items():
        default.append(f"<{district}> c:contains <{street}> .\n")
        default.append(f"<{street}> c:hasCapacity {rng.randint(2, 12)} .\n")
    for index in range(60):
        default.append(f"<{C}Sensor-{index}> c:placedIn <{streets[rng.randrange(8)]}> .\n")
    files.graphs[None] = folder / "city.ttl"
    files.graphs[None].write_text("".join(default), encoding="utf-8")

    brokers = [f"{B}broker-{i}" for i in range(10)]
    brokers_graph = [f"@prefix b: <{B}> .\n"] + [f"<{b}> b:is_from \"{rng.choice(['CH', 'CH', 'IT', 'DE'])}\" .\n" for b in brokers]
    files.graphs[GRAPHS["brokers"]] = folder / "brokers.ttl"
    files.graphs[GRAPHS["brokers"]].write_text("".join(brokers_graph), encoding="utf-8")

    users = [f"{GLUE}id{i}" for i in range(1, 30)]
    friends = [f"@prefix foaf: <{FOAF}> .\n"] + [f"<{GLUE}id1> foaf:knows <{u}> .\n" for u in users[1:12]]
    files.graphs[GRAPHS["friends"]] = folder / "friends.ttl"
    files.graphs[GRAPHS["friends"]].write_text("".join(friends), encoding="utf-8")

    step = 60_000_000 // rate
    streams: dict[str, list[tuple[str, int]]] = {name: [] for name in STREAMS}
    topics = [f"http://getglue.com/topic/{t}" for t in ("movies", "music", "books", "games", "tv", "sports")]
    for index, instant in enumerate(range(begin + step, end + 1, step)):
        jitter = rng.randrange(0, step)
        at = instant - jitter
        tollgate = rng.choice(tollgates)
        car = rng.choice(cars)
        streams["milantollgates"].append(_quad(_iri(tollgate), _iri(T + "registers"), _iri(car), at))
        gate = rng.choice(tollgates)
        streams["citytollgates"].append(_quad(_iri(gate), _iri(T + "registers"), _iri(rng.choice(cars)), at))
        if index % 6 == 0:  # tollgates announce where they stand (read through GRAPH <stream>, 000 §5.8)
            streams["citytollgates"].append(_quad(_iri(gate), _iri(C + "placedIn"), _iri(tollgate_street[gate]), at))
        camera = rng.choice(cameras)
        partner = cameras[cameras.index(camera) ^ 1]
        seen = rng.choice(cars)
        streams["citycameras"].append(_quad(_iri(camera), _iri(T + "registers"), _iri(seen), at))
        if rng.random() < 0.4:  # the same car seen turning by the paired camera a little later
            streams["citycameras"].append(_quad(_iri(partner), _iri(T + "registers"), _iri(seen), min(at + rng.randrange(1, 30) * 1_000_000, end)))
        if index % rate == 0:  # every minute, each camera says where it stands and what it monitors
            for each in cameras:
                streams["citycameras"].append(_quad(_iri(each), _iri(C + "placedAt"), _iri(camera_light[each]), at))
                streams["citycameras"].append(_quad(_iri(each), _iri(C + "monitors"), _iri(camera_street[each]), at))
            for light in lights:
                streams["citycameras"].append(_quad(_iri(light), _iri(C + "crossing"), _iri(light_street[light]), at))
        streams["uctollgates"].append(_quad(_iri(tollgate), _iri(T + "registers"), _iri(car), at))
        tx = f"http://stockexchange.org/tx/{index}"
        broker = rng.choice(brokers)
        amount = rng.randint(1, 40)
        streams["market"].append(_quad(_iri(broker), _iri(X11 + "does"), _iri(tx), at))
        streams["market"].append(_quad(_iri(tx), _iri(X11 + "with"), f'"{amount}"^^<{XSD_INTEGER}>', at))
        streams["market"].append(_quad(_iri(tx), _iri(X12 + "seller"), _iri(broker), at))
        streams["market"].append(_quad(_iri(tx), _iri(X12 + "with"), f'"{amount}"^^<{XSD_INTEGER}>', at))
        post = f"http://getglue.com/post/{index}"
        streams["interactions"].append(_quad(_iri(post), _iri(RDF_TYPE), _iri(SIOC + "Post"), at))
        streams["interactions"].append(_quad(_iri(post), _iri(SIOC + "has_creator"), _iri(rng.choice(users)), at))
        streams["interactions"].append(_quad(_iri(post), _iri(SIOC + "topic"), _iri(rng.choice(topics)), at))
    for name, events in streams.items():
        path = folder / f"{name}.{format}"
        path.write_text(stream_text(name, events, format), encoding="utf-8")
        files.streams[STREAMS[name]] = path
    return files
