"""Urban data for the example queries of ``examples/queries``: tollgates, streets, districts, cameras,
sensors, capacities, a broker market and getglue topics, shaped so that every example with ``expect: ok``
has results at the evaluation instant (2010-03-22T10:30:00Z).

Streams hold what the papers put in them (registrations, transactions, posts). Where an example reads a
stream window as a named graph (``GRAPH <citytollgates> { ?tollgate t:registers ?car . ?tollgate c:placedIn
?street }``, the C-SPARQL article, §5.8) the window must hold the static facts too, so those streams also
carry them.
"""

from __future__ import annotations

import re
from pathlib import Path

from rdflib import Literal, URIRef

from conformance.reference import Case

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queries"
C = "http://linkedurbandata.org/city#"
T = "http://linkedurbandata.org/traffic#"
B = "http://brokerscentral.org/accounts#"
X = "http://stockexchange.org/exchanges#"
XS = "http://stockexchanges.org/exchanges#"
SIOC = "http://rdfs.org/sioc/ns#"
FOAF = "http://xmlns.com/foaf/0.1/"
GLUE = "http://getglue.com/user/"
RDF_TYPE = URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
XSD = "http://www.w3.org/2001/XMLSchema#"

MILAN = URIRef("http://streams.org/milantollgates.trdf")
UC = URIRef("www.uc.eu/tollgates.trdf")  # 001's relative stream IRI, kept as written (no BASE)
CITY_TOLLGATES = URIRef("http://streams.org/citytollgates.trdf")
CAMERAS = URIRef("http://streams.org/citycameras.trdf")
MARKET = URIRef("http://stockexchange.org/market.trdf")
GETGLUE = URIRef("http://getglue.com/interactions.trdf")
BROKERS = URIRef("http://brokerscentral.org/brokers.rdf")
FRIENDS = URIRef("http://getglue.com/friends.rdf")

AT = 1_269_253_800_000_000  # 2010-03-22T10:30:00Z
SECOND = 1_000_000


def c(name: str) -> URIRef:
    return URIRef(C + name)


def t(name: str) -> URIRef:
    return URIRef(T + name)


def num(n) -> Literal:
    if isinstance(n, int):
        return Literal(str(n), datatype=URIRef(XSD + "integer"), normalize=False)
    return Literal(str(n), datatype=URIRef(XSD + "decimal"), normalize=False)


def before(seconds: int) -> int:
    return AT - seconds * SECOND


TOLLGATES = {"T-130": "Pine-Park", "T-142": "Oak-Avenue", "T-151": "Palm-Street", "T-160": "Elm-Road"}
DISTRICTS = {"Centre": ["Oak-Avenue", "Palm-Street"], "North": ["Pine-Park", "Elm-Road"]}


def _registrations() -> list:
    """Cars through tollgates: at 20 s spacing over the last 40 minutes, a few twice, one exactly on a bound."""
    items = []
    gates = list(TOLLGATES)
    for i in range(40):
        gate = gates[(i * 7) % len(gates)]
        car = c(f"CAR{i % 23:02d}")
        items.append((c(gate), t("registers"), car, before(60 * i + 20 * (i % 3))))
    items.append((c("T-142"), t("registers"), c("CAR01"), before(300)))  # a window bound: 10:25:00
    items.append((c("T-130"), t("registers"), c("CAR02"), AT))  # the window end itself
    items.append((c("T-151"), t("registers"), c("CAR99"), AT + 30 * SECOND))  # after the window
    return items


def _static_city() -> list:
    triples = []
    for gate, street in TOLLGATES.items():
        triples.append((c(gate), c("placedIn"), c(street)))
    for district, streets in DISTRICTS.items():
        for street in streets:
            triples.append((c(district), c("contains"), c(street)))
    for i in range(14):  # sensors: Oak-Avenue gets 7, Pine-Park 5, the others fewer
        street = ["Oak-Avenue", "Oak-Avenue", "Pine-Park", "Oak-Avenue", "Pine-Park", "Palm-Street", "Oak-Avenue"][i % 7]
        triples.append((c(f"S{i:02d}"), c("placedIn"), c(street)))
    triples += [(c("S20"), c("placedIn"), c("Oak-Avenue")), (c("S21"), c("placedIn"), c("Pine-Park"))]
    for street, capacity in {"Oak-Avenue": 2, "Palm-Street": 3, "Pine-Park": 10, "Elm-Road": 1}.items():
        triples.append((c(street), c("hasCapacity"), num(capacity)))
    # cameras at traffic lights (the C-SPARQL article, §5.9): camera 1 watches Oak Avenue, camera 2 Palm
    # Street, same light
    triples += [
        (c("CAM1"), c("monitors"), c("Oak-Avenue")),
        (c("CAM2"), c("monitors"), c("Palm-Street")),
        (c("CAM1"), c("placedAt"), c("L1")),
        (c("CAM2"), c("placedAt"), c("L1")),
        (c("CAM3"), c("monitors"), c("Oak-Avenue")),
        (c("CAM3"), c("placedAt"), c("L2")),
    ]
    return triples


def _cameras() -> list:
    items = []
    # the light/crossing facts also travel in the camera stream (read there through GRAPH <citycameras>)
    for camera, light, street in (("CAM1", "L1", "Oak-Avenue"), ("CAM2", "L1", "Palm-Street"), ("CAM3", "L2", "Elm-Road")):
        items.append((c(camera), c("placedAt"), c(light), before(200)))
        items.append((c(light), c("crossing"), c(street), before(190)))
    sightings = [
        ("CAM2", "CAR05", 240), ("CAM1", "CAR05", 120),  # Palm then Oak: turns from Palm into Oak
        ("CAM2", "CAR06", 100), ("CAM1", "CAR06", 200),  # Oak first: does not
        ("CAM2", "CAR07", 280), ("CAM1", "CAR07", 30),
        ("CAM3", "CAR08", 50), ("CAM1", "CAR09", 500), ("CAM2", "CAR09", 400),  # outside 5 minutes partly
        ("CAM2", "CAR10", 60), ("CAM1", "CAR10", 60),  # same instant: not later
    ]
    for camera, car, seconds in sightings:
        items.append((c(camera), t("registers"), c(car), before(seconds)))
    return items


def _city_tollgates() -> list:
    items = list(_registrations())
    for gate, street in TOLLGATES.items():
        items.append((c(gate), c("placedIn"), c(street), before(400)))
    return items


def _market() -> list:
    items = []
    brokers = ["BrokerA", "BrokerB", "BrokerC"]
    for i in range(18):
        broker = URIRef(B + brokers[i % 3])
        tx = URIRef(X + f"tx{i}")
        amount = num([5, 12, 30, 8, 15, 22][i % 6] if i % 4 else 12.5)
        tau = before(3600 * (i % 20) + 17)
        items.append((broker, URIRef(X + "does"), tx, tau))
        items.append((tx, URIRef(X + "with"), amount, tau))
        seller = URIRef(B + f"Seller{i % 4}")
        tx2 = URIRef(XS + f"tr{i}")
        items.append((tx2, URIRef(XS + "seller"), seller, tau))
        items.append((tx2, URIRef(XS + "with"), amount, tau))
    items.append((URIRef(X + "old"), URIRef(X + "with"), num(99), before(3600 * 30)))  # before the 24 hours
    return items


def _brokers() -> list:
    return [
        (URIRef(B + "BrokerA"), URIRef(B + "is_from"), Literal("CH")),
        (URIRef(B + "BrokerB"), URIRef(B + "is_from"), Literal("CH")),
        (URIRef(B + "BrokerC"), URIRef(B + "is_from"), Literal("IT")),
    ]


def _getglue() -> list:
    items = []
    topics = ["Inception", "Lost", "Glee", "Lost", "Inception", "Lost"]
    for i in range(16):
        post = URIRef(f"http://getglue.com/post/{i}")
        friend = URIRef(GLUE + f"id{2 + i % 4}")
        tau = before(12 * i + 5) if i < 10 else before(900 * (i - 9))
        items.append((post, URIRef(SIOC + "has_creator"), friend, tau))
        items.append((post, RDF_TYPE, URIRef(SIOC + "Post"), tau))
        items.append((post, URIRef(SIOC + "topic"), Literal(topics[i % len(topics)]), tau))
    return items


def _friends() -> list:
    return [
        (URIRef(GLUE + "id1"), URIRef(FOAF + "knows"), URIRef(GLUE + "id2")),
        (URIRef(GLUE + "id1"), URIRef(FOAF + "knows"), URIRef(GLUE + "id3")),
        (URIRef(GLUE + "id4"), URIRef(FOAF + "knows"), URIRef(GLUE + "id5")),
    ]


def urban_data() -> tuple[dict, dict]:
    streams = {
        MILAN: _registrations(),
        UC: _registrations(),
        CITY_TOLLGATES: _city_tollgates(),
        CAMERAS: _cameras(),
        MARKET: _market(),
        GETGLUE: _getglue(),
    }
    graphs = {None: _static_city(), BROKERS: _brokers(), FRIENDS: _friends()}
    return streams, graphs


def example_files() -> list[Path]:
    """The example queries whose header says ``expect: ok``."""
    return [p for p in sorted(EXAMPLES.glob("*.rq")) if re.search(r"^# expect: ok", p.read_text(encoding="utf-8"), flags=re.M)]


def example_cases() -> list[Case]:
    streams, graphs = urban_data()
    return [Case(path.stem, path.read_text(encoding="utf-8"), streams, graphs, AT) for path in example_files()]
