"""A seeded generator of SRBench data (SRBench, §4) at any size: the observation stream and its four static graphs.

SRBench's data are the LinkedSensorData observations of US weather stations during hurricanes and a blizzard, the
stations' metadata, GeoNames and DBpedia. This generator writes data with exactly their schema (SRBench, §4.2),
shaped so that every SRBench query has answers in some windows and none in others:

Stations (``om-owl:System``) come in six kinds, in turn: *coastal* (near a Florida coast, beach or shore), *city*
(near a large Louisiana city that has an airport), *suburb* (near a small neighbourhood of a large Texas city),
*mountain* (near a Nevada mountain), *heritage* (near a Florida site that DBpedia lists as a World Heritage Site,
linked by ``owl:sameAs``) and *rural* (near a small Texas town). Station i and station i + 6 are near the same
place (so they are neighbours, as SRBench's Q11 asks). Station 0 stands at a fixed place (``STATION_0``, the "given
location" of Q8 and Q9).

Every station observes air temperature, relative humidity, wind speed and wind direction every hour
(``rate`` times an hour, at minutes fixed per station and property); coastal and heritage stations also peak
wind speed and gusts; city stations rainfall and visibility; suburb stations a smoothed precipitation flag
(``om-owl:TruthData``); mountain stations snow depth and a smoothed snow flag. An observation is five triples
(its class, observed property, procedure, result and sampling time), its result three or two (MeasureData
with float value and unit, or TruthData with a boolean), its instant two, and the station's
``om-owl:generatedObservation`` one; all carry the observation's time.

The ``Scenario`` (hours from the start, scaled with ``hours``) says when things happen: a hurricane over the
coastal and heritage stations (winds of 80–95 mph, with strong winds of 28–50 mph before and after it),
rain over the cities (heavy, with low visibility, for part of it), a blizzard over the mountains (snow,
15–28 °F, winds of 45–60 mph), and one rural station that stops reporting.

GeoNames has the United States, four states, a county per place, and the features the stations are near, with
``gn:parentFeature`` (and ``gn:parentADM1``/``gn:parentADM2``/``gn:parentCountry``) up to the country, plus small
towns in every county (``towns_per_county``). DBpedia has hurricanes typed with YAGO classes three levels below
``yago:Hurricane111467018`` (with ``dbpprop:1MinWinds``, ``dbpprop:damages`` and ``dbpprop:areas``), a tropical
storm that is not a hurricane, the heritage sites with ``dcterms:subject`` categories whose ``skos:broader``
chains lead (or not) to ``category:World_Heritage_Sites``, and ``owl:sameAs`` links to GeoNames written
backwards and through a third resource (so that only owl:sameAs reasoning finds them), and a museum that is
no heritage site. The ontology graph has the class and property hierarchies
of the weather and sensor-observation ontologies.

Everything is a function of the arguments: the same seed and size give the same triples, in the same order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timezone

from rdflib import BNode, Literal, URIRef
from rdflib.term import Identifier

from csparql.srbench.vocabulary import (
    CATEGORY,
    DBPEDIA,
    DBPEDIA_ONTOLOGY,
    DBPEDIA_GRAPH,
    DBPPROP,
    DCTERMS,
    FOAF,
    GEONAMES,
    GEONAMES_GRAPH,
    GN,
    MESOWEST,
    OM,
    ONTOLOGY,
    OWL_SAMEAS,
    OWL_TIME,
    RDF_TYPE,
    RDFS_SUBCLASSOF,
    RDFS_SUBPROPERTYOF,
    SENS,
    SENSORS,
    SKOS,
    WEATHER,
    WGS84,
    WIKIDATA,
    XSD,
    YAGO,
)
from csparql.core.windows import from_micros, to_micros

HOUR = 3_600_000_000
MINUTE = 60_000_000
DEFAULT_START = datetime(2005, 8, 28, tzinfo=timezone.utc)  # hurricane Katrina's landfall week
KINDS = ("coastal", "city", "suburb", "mountain", "heritage", "rural")
ID_PREFIX = {"coastal": "CST", "city": "CTY", "suburb": "SUB", "mountain": "MTN", "heritage": "HER", "rural": "RUR"}
MIN_STATIONS = len(KINDS)
MIN_HOURS = 15
# Station 0's place: the "given location" of Q8 and Q9 (SRBench, §5.8 and §5.9), the same at every size and seed.
STATION_0 = {"lat": "25.7617", "long": "-80.1918", "alt": "2.0"}

Triple = tuple[Identifier, Identifier, Identifier]
TimedTriple = tuple[Identifier, Identifier, Identifier, int]


@dataclass(frozen=True)
class Size:
    """How much data: stations, hours of observations from ``start``, samples per property per hour, and
    filler towns per GeoNames county."""

    stations: int = 12
    hours: int = 30
    rate: int = 1
    towns_per_county: int = 3

    def __post_init__(self):
        if self.stations < MIN_STATIONS:
            raise ValueError(f"SRBench data needs at least {MIN_STATIONS} stations (one of each kind), not {self.stations}")
        if self.hours < MIN_HOURS:
            raise ValueError(f"SRBench data needs at least {MIN_HOURS} hours, not {self.hours}")
        if not 1 <= self.rate <= 60:
            raise ValueError(f"the rate is samples per property per hour, from 1 to 60, not {self.rate}")
        if self.towns_per_county < 0:
            raise ValueError("towns_per_county cannot be negative")


@dataclass(frozen=True)
class Interval:
    """Hours [start, end) after the start of the data."""

    start: int
    end: int

    def __contains__(self, hour: int) -> bool:
        return self.start <= hour < self.end


@dataclass(frozen=True)
class Scenario:
    """When the weather events happen, in hours from the start (scaled to the number of hours)."""

    windy_before: Interval
    hurricane: Interval
    windy_after: Interval
    rain: tuple[Interval, ...]
    heavy_rain: Interval
    blizzard: Interval
    breakdown: int  # the hour from which the broken station sends nothing

    @classmethod
    def of(cls, hours: int) -> Scenario:
        def at(fraction: float) -> int:
            return int(fraction * hours)

        return cls(
            windy_before=Interval(at(0.08), at(0.15)),
            hurricane=Interval(at(0.15), at(0.35)),
            windy_after=Interval(at(0.35), at(0.40)),
            rain=(Interval(at(0.17), at(0.30)), Interval(at(0.60), at(0.67))),
            heavy_rain=Interval(at(0.20), at(0.27)),
            blizzard=Interval(at(0.40), at(0.54)),
            breakdown=at(0.67),
        )


@dataclass
class Station:
    index: int
    kind: str
    id: str
    lat: float
    long: float
    alt: float
    near: URIRef  # the GeoNames feature it is located near
    properties: tuple[str, ...]
    broken: bool = False

    @property
    def system(self) -> URIRef:
        return SENS[f"System_{self.id}"]


@dataclass
class SRBenchData:
    """Generated data: the stream as (s, p, o, τ µs) in time order, the static graphs by IRI, and what the tests
    and queries need to know about it."""

    size: Size
    seed: int
    start: int  # µs since the epoch
    scenario: Scenario
    stations: list[Station]
    stream: list[TimedTriple] = field(default_factory=list)
    graphs: dict[URIRef, list[Triple]] = field(default_factory=dict)

    def instant(self, hours: float) -> int:
        """The instant ``hours`` after the start (µs)."""
        return self.start + round(hours * HOUR)

    def last_observation(self, station: Station) -> int:
        """When a station last reported (µs)."""
        return max(t[3] for t in self.stream if t[0] == station.system and t[1] == OM.generatedObservation)


# What each observed property is: its observation class, its unit (None: TruthData) and who observes it.
PROPERTIES = {
    "AirTemperature": (WEATHER.TemperatureObservation, WEATHER.fahrenheit),
    "RelativeHumidity": (WEATHER.RelativeHumidityObservation, OM.percent),
    "WindSpeed": (WEATHER.WindSpeedObservation, WEATHER.milesPerHour),
    "WindDirection": (WEATHER.WindDirectionObservation, OM.degrees),
    "PeakWindSpeed": (WEATHER.WindSpeedObservation, WEATHER.milesPerHour),
    "WindGust": (WEATHER.WindSpeedObservation, WEATHER.milesPerHour),
    "PrecipitationAccumulated": (WEATHER.RainfallObservation, WEATHER.centimeters),
    "Visibility": (WEATHER.VisibilityObservation, WEATHER.centimeters),
    "PrecipitationSmoothed": (WEATHER.PrecipitationObservation, None),
    "SnowDepth": (WEATHER.SnowfallObservation, WEATHER.centimeters),
    "SnowSmoothed": (WEATHER.SnowfallObservation, None),
}
BASIC = ("AirTemperature", "RelativeHumidity", "WindSpeed", "WindDirection")
EXTRA = {
    "coastal": ("PeakWindSpeed", "WindGust"),
    "heritage": ("PeakWindSpeed", "WindGust"),
    "city": ("PrecipitationAccumulated", "Visibility"),
    "suburb": ("PrecipitationSmoothed",),
    "mountain": ("SnowDepth", "SnowSmoothed"),
    "rural": (),
}
STATES = {  # GeoNames id, name, official name, a bounding box (lat, long) for places
    "Florida": (4155751, "State of Florida", (25.1, 30.9), (-87.6, -80.0)),
    "Louisiana": (4331987, "State of Louisiana", (29.0, 33.0), (-94.0, -89.0)),
    "Texas": (4736286, "State of Texas", (26.0, 36.5), (-106.6, -93.5)),
    "Nevada": (5509151, "State of Nevada", (35.0, 42.0), (-120.0, -114.0)),
}
KIND_STATE = {"coastal": "Florida", "heritage": "Florida", "city": "Louisiana", "suburb": "Texas",
              "rural": "Texas", "mountain": "Nevada"}
SHORE_CODES = (("L", "L.CST"), ("T", "T.BCH"), ("T", "T.SHOR"))
# Names of the places stations are near, per kind (a number is added once a list is used up). None of them
# holds "Florida", which Q13 looks for in the names of the shores' ancestors.
PLACE_NAMES = {
    "coastal": ("Crandon", "Key Biscayne", "Hollywood", "Naples", "Sanibel", "Pensacola"),
    "city": ("New Orleans", "Baton Rouge", "Lafayette", "Shreveport", "Lake Charles", "Monroe"),
    "suburb": ("Houston", "Galveston", "Beaumont", "Corpus Christi", "Port Arthur", "Victoria"),
    "mountain": ("Wheeler", "Boundary", "Charleston", "Jefferson", "Arc Dome", "Ruby Dome"),
    "heritage": ("Everglades", "Dry Tortugas", "Biscayne", "Canaveral", "Ocala", "Apalachicola"),
    "rural": ("Sweetwater", "Marfa", "Alpine", "Ozona", "Sonora", "Junction"),
}
UNITED_STATES = 6252001


def generate(size: Size = Size(), seed: int = 1, start: datetime = DEFAULT_START) -> SRBenchData:
    """SRBench data of the given size (see the module docstring); deterministic in ``size``, ``seed``, ``start``."""
    return _Generator(size, seed, start).run()


class _Generator:
    def __init__(self, size: Size, seed: int, start: datetime):
        self.size = size
        self.seed = seed
        self.random = random.Random(seed)
        self.start = to_micros(start) // 1_000_000 * 1_000_000
        self.scenario = Scenario.of(size.hours)
        self.next_feature = 4_900_000
        self.sensors: list[Triple] = []
        self.geonames: list[Triple] = []
        self.dbpedia: list[Triple] = []
        self.ontology: list[Triple] = []
        self.stream: list[TimedTriple] = []
        self.places: dict[tuple[str, int], dict] = {}

    def run(self) -> SRBenchData:
        self.write_ontology()
        self.write_geonames_top()
        stations = self.write_stations()
        self.write_dbpedia(list(self.places.values()))
        self.write_observations(stations)
        self.stream.sort(key=lambda t: t[3])
        data = SRBenchData(self.size, self.seed, self.start, self.scenario, stations)
        data.stream = self.stream
        data.graphs = {SENSORS: self.sensors, GEONAMES_GRAPH: self.geonames, DBPEDIA_GRAPH: self.dbpedia,
                       ONTOLOGY: self.ontology}
        return data

    # helpers

    def feature(self) -> URIRef:
        self.next_feature += 1
        return GEONAMES[f"{self.next_feature}/"]

    @staticmethod
    def float_literal(value: float, digits: int = 2) -> Literal:
        return Literal(f"{value:.{digits}f}", datatype=XSD.float)

    # the ontology

    def write_ontology(self) -> None:
        o = self.ontology
        sub = [
            (WEATHER.PrecipitationObservation, OM.Observation),
            (WEATHER.RainfallObservation, WEATHER.PrecipitationObservation),
            (WEATHER.SnowfallObservation, WEATHER.PrecipitationObservation),
            (WEATHER.TemperatureObservation, OM.Observation),
            (WEATHER.FreezingTemperatureObservation, WEATHER.TemperatureObservation),
            (WEATHER.WindObservation, OM.Observation),
            (WEATHER.WindSpeedObservation, WEATHER.WindObservation),
            (WEATHER.WindDirectionObservation, WEATHER.WindObservation),
            (WEATHER.VisibilityObservation, OM.Observation),
            (WEATHER.RelativeHumidityObservation, OM.Observation),
            (WEATHER.PressureObservation, OM.Observation),
            (WEATHER.RadiationObservation, OM.Observation),
            (OM.MeasureData, OM.ResultData),
            (OM.TruthData, OM.ResultData),
            (WEATHER.Blizzard, WEATHER.WeatherCondition),
        ]
        o.extend((c, RDFS_SUBCLASSOF, d) for c, d in sub)
        o.extend(
            (p, RDFS_SUBPROPERTYOF, q)
            for p, q in [
                (OM.floatValue, OM.value),
                (OM.booleanValue, OM.value),
                (WEATHER._WindSpeed, WEATHER.WindSpeed),
                (WEATHER._PeakWindSpeed, WEATHER.WindSpeed),
                (WEATHER._WindGust, WEATHER._PeakWindSpeed),
                (GN.parentADM1, GN.parentFeature),
                (GN.parentADM2, GN.parentFeature),
                (GN.parentCountry, GN.parentFeature),
            ]
        )

    # GeoNames

    def gn(self, feature: URIRef, name: str, klass: str, code: str, parent: URIRef | None, lat: float, long: float,
           population: int | None = None, official: str | None = None, ancestors: dict | None = None) -> None:
        g = self.geonames
        g.append((feature, RDF_TYPE, GN.Feature))
        g.append((feature, GN.name, Literal(name)))
        g.append((feature, GN.featureClass, GN[klass]))
        g.append((feature, GN.featureCode, GN[code]))
        g.append((feature, GN.countryCode, Literal("US")))
        g.append((feature, WGS84.lat, self.float_literal(lat, 5)))
        g.append((feature, WGS84.long, self.float_literal(long, 5)))
        if population is not None:
            g.append((feature, GN.population, Literal(str(population), datatype=XSD.integer)))
        if official is not None:
            g.append((feature, GN.officialName, Literal(official)))
        if parent is not None:
            g.append((feature, GN.parentFeature, parent))
        for prop, target in (ancestors or {}).items():
            g.append((feature, GN[prop], target))

    def write_geonames_top(self) -> None:
        country = GEONAMES[f"{UNITED_STATES}/"]
        self.gn(country, "United States", "A", "A.PCLI", None, 39.76, -98.5, population=310232863)
        self.states = {}
        for name, (number, official, lats, longs) in STATES.items():
            state = GEONAMES[f"{number}/"]
            self.states[name] = state
            lat, long = sum(lats) / 2, sum(longs) / 2
            self.gn(state, name, "A", "A.ADM1", country, lat, long, official=official,
                    ancestors={"parentCountry": country})

    def place_in(self, state: str) -> tuple[float, float]:
        _, _, lats, longs = STATES[state]
        return round(self.random.uniform(*lats), 4), round(self.random.uniform(*longs), 4)

    def county(self, state_name: str, label: str) -> URIRef:
        state = self.states[state_name]
        county = self.feature()
        lat, long = self.place_in(state_name)
        self.gn(county, f"{label} County", "A", "A.ADM2", state, lat, long,
                ancestors={"parentADM1": state, "parentCountry": self.country()})
        for town in range(self.size.towns_per_county):
            feature = self.feature()
            tlat, tlong = self.place_in(state_name)
            self.gn(feature, f"{label} Town {town + 1}", "P", "P.PPL", county, tlat, tlong,
                    population=self.random.randint(200, 9000),
                    ancestors={"parentADM1": state, "parentADM2": county, "parentCountry": self.country()})
        return county

    def country(self) -> URIRef:
        return GEONAMES[f"{UNITED_STATES}/"]

    def place_for(self, index: int) -> dict:
        """The place station ``index`` is near: stations i and i + 6 share one (SRBench's Q11: stations near the
        same place are neighbours), so places are made per kind and pair of six-station groups; heritage sites are
        one per station (each links to DBpedia its own way)."""
        kind = KINDS[index % MIN_STATIONS]
        key = (kind, index // MIN_STATIONS if kind == "heritage" else index // MIN_STATIONS // 2)
        if key not in self.places:
            self.places[key] = self.write_place(kind, key[1])
        return self.places[key]

    def write_place(self, kind: str, group: int) -> dict:
        state_name = KIND_STATE[kind]
        state = self.states[state_name]
        names = PLACE_NAMES[kind]
        label = names[group % len(names)] + (f" {group // len(names) + 1}" if group >= len(names) else "")
        county = self.county(state_name, label)
        up = {"parentADM1": state, "parentADM2": county, "parentCountry": self.country()}
        lat, long = self.place_in(state_name)
        near = self.feature()
        place = {"kind": kind, "group": group, "near": near, "state": state_name, "county": county}
        if kind in ("coastal",):
            klass, code = SHORE_CODES[group % len(SHORE_CODES)]
            name = {"L.CST": "Coast", "T.BCH": "Beach", "T.SHOR": "Shore"}[code]
            self.gn(near, f"{label} {name}", klass, code, county, lat, long, ancestors=up)
        elif kind == "city":
            population = self.random.randint(20_000, 400_000)
            self.gn(near, label, "P", "P.PPLA2", county, lat, long, population=population,
                    official=f"City of {label}", ancestors=up)
            airport = self.feature()
            self.gn(airport, f"{label} International Airport", "S", "S.AIRP", near, lat + 0.05, long + 0.05,
                    ancestors=up)
        elif kind == "suburb":
            city = self.feature()
            self.gn(city, label, "P", "P.PPL", county, lat, long,
                    population=self.random.randint(16_000, 900_000), ancestors=up)
            self.gn(near, f"{label} Heights", "P", "P.PPLX", city, lat + 0.02, long - 0.02,
                    population=self.random.randint(1_000, 9_000), ancestors=up)
        elif kind == "mountain":
            self.gn(near, f"{label} Peak", "T", "T.MT", county, lat, long, ancestors=up)
        elif kind == "heritage":
            self.gn(near, f"{label} National Park", "S", "S.HSTS", county, lat, long, ancestors=up)
        else:
            self.gn(near, f"{label} Village", "P", "P.PPL", county, lat, long,
                    population=self.random.randint(300, 4_000), ancestors=up)
        place["lat"], place["long"], place["label"] = lat, long, label
        return place

    # sensors

    def write_stations(self) -> list[Station]:
        stations = []
        s = self.sensors
        first_rural = None
        for index in range(self.size.stations):
            kind = KINDS[index % MIN_STATIONS]
            place = self.place_for(index)
            if index == 0:
                lat, long, alt = float(STATION_0["lat"]), float(STATION_0["long"]), float(STATION_0["alt"])
            else:
                lat = round(place["lat"] + self.random.uniform(-0.05, 0.05), 4)
                long = round(place["long"] + self.random.uniform(-0.05, 0.05), 4)
                alt = round(self.random.uniform(1500, 3500) if kind == "mountain" else self.random.uniform(0, 300), 1)
            station = Station(index, kind, f"{ID_PREFIX[kind]}{index:02d}", lat, long, alt, place["near"],
                              BASIC + EXTRA[kind])
            if kind == "rural" and first_rural is None:
                station.broken = True
                first_rural = station
            stations.append(station)
            system, rel, point = station.system, SENS[f"LocatedNearRel{station.id}"], SENS[f"point_{station.id}"]
            s.append((system, RDF_TYPE, OM.System))
            s.append((system, OM.ID, Literal(station.id)))
            s.append((system, OM.hasLocatedNearRel, rel))
            s.append((system, OM.hasSourceURI, URIRef(MESOWEST + station.id)))
            s.extend((system, OM.parameter, WEATHER["_" + prop]) for prop in station.properties)
            s.append((system, OM.processLocation, point))
            s.append((rel, RDF_TYPE, OM.LocatedNearRel))
            s.append((rel, OM.distance, self.float_literal(self.random.uniform(0.2, 9.0), 4)))
            s.append((rel, OM.hasLocation, station.near))
            s.append((rel, OM.uom, WEATHER.miles))
            s.append((point, RDF_TYPE, WGS84.Point))
            if index == 0:
                s.append((point, WGS84.alt, Literal(STATION_0["alt"], datatype=XSD.float)))
                s.append((point, WGS84.lat, Literal(STATION_0["lat"], datatype=XSD.float)))
                s.append((point, WGS84.long, Literal(STATION_0["long"], datatype=XSD.float)))
            else:
                s.append((point, WGS84.alt, self.float_literal(alt, 1)))
                s.append((point, WGS84.lat, self.float_literal(lat, 4)))
                s.append((point, WGS84.long, self.float_literal(long, 4)))
        return stations

    # DBpedia

    def write_dbpedia(self, places: list[dict]) -> None:
        d = self.dbpedia
        hierarchy = [
            (YAGO.Hurricane111467018, YAGO.Cyclone111452218),
            (YAGO.Cyclone111452218, YAGO.Windstorm111469188),
            (YAGO.AtlanticHurricanes, YAGO.Hurricane111467018),
            (YAGO.PacificHurricanes, YAGO.Hurricane111467018),
            (YAGO.CategoryFiveAtlanticHurricanes, YAGO.AtlanticHurricanes),
            (YAGO.CategoryFourAtlanticHurricanes, YAGO.AtlanticHurricanes),
            (YAGO.CategoryOneAtlanticHurricanes, YAGO.AtlanticHurricanes),
            (YAGO.AtlanticTropicalStorms, YAGO.TropicalStorm111469188),
            (YAGO.TropicalStorm111469188, YAGO.Windstorm111469188),
        ]
        d.extend((c, RDFS_SUBCLASSOF, p) for c, p in hierarchy)
        storms = [
            ("Hurricane_Katrina", YAGO.CategoryFiveAtlanticHurricanes, 175, "1.08E11", ("Florida", "Louisiana", "Mississippi")),
            ("Hurricane_Wilma", YAGO.CategoryFiveAtlanticHurricanes, 185, "2.94E10", ("Florida", "Cuba")),
            ("Hurricane_Charley", YAGO.CategoryFourAtlanticHurricanes, 150, "1.68E10", ("Florida",)),
            ("Hurricane_Ike", YAGO.CategoryFourAtlanticHurricanes, 145, "3.8E10", ("Texas", "Louisiana")),
            ("Hurricane_Ophelia_(2005)", YAGO.CategoryOneAtlanticHurricanes, 85, "7.0E7", ("North Carolina",)),
            ("Hurricane_Cindy_(2005)", YAGO.CategoryOneAtlanticHurricanes, 75, "3.2E8", ("Louisiana",)),
            ("Hurricane_Emily_(2005)", YAGO.PacificHurricanes, 160, "1.01E9", ("Texas",)),
            ("Tropical_Storm_Arlene_(2005)", YAGO.AtlanticTropicalStorms, 60, "1.15E7", ("Florida",)),
        ]
        for name, klass, winds, damages, areas in storms:
            storm = DBPEDIA[name]
            d.append((storm, RDF_TYPE, klass))
            d.append((storm, DBPPROP["1MinWinds"], Literal(str(winds), datatype=XSD.integer)))
            d.append((storm, DBPPROP.damages, Literal(damages, datatype=XSD.double)))
            d.append((storm, DBPPROP.name, Literal(name.replace("_", " "))))
            for area in areas:
                node = BNode(f"{name}_{area}".replace(" ", "_").replace("(", "").replace(")", ""))
                d.append((storm, DBPPROP.areas, node))
                d.append((node, FOAF.name, Literal(area)))
        # categories: World_Heritage_Sites at the top, reached through chains of skos:broader
        top = CATEGORY.World_Heritage_Sites
        by_country = CATEGORY.World_Heritage_Sites_by_country
        in_us = CATEGORY.World_Heritage_Sites_in_the_United_States
        d.append((by_country, SKOS.broader, top))
        d.append((in_us, SKOS.broader, by_country))
        d.append((CATEGORY.Museums_in_Florida, SKOS.broader, CATEGORY.Museums))
        d.append((CATEGORY.Parks_in_Florida, SKOS.broader, CATEGORY.Parks_in_the_United_States))
        heritage = [p for p in places if p["kind"] == "heritage"]
        for number, place in enumerate(heritage):
            site = DBPEDIA[f"{place['label']} National Park".replace(" ", "_")]
            category = (in_us, by_country, top)[number % 3]
            d.append((site, RDF_TYPE, DBPEDIA_ONTOLOGY.Place))
            d.append((site, DCTERMS.subject, category))
            d.append((site, DCTERMS.subject, CATEGORY.Parks_in_Florida))
            d.append((site, FOAF.name, Literal(f"{place['label']} National Park")))
            if number % 2 == 0:  # through a third resource that both link to (symmetry and transitivity)
                middle = WIKIDATA[f"Q{9_000_000 + number}"]
                d.append((site, OWL_SAMEAS, middle))
                self.geonames.append((place["near"], OWL_SAMEAS, middle))
            else:  # GeoNames links to DBpedia (symmetry)
                self.geonames.append((place["near"], OWL_SAMEAS, site))
        # a site near a station that is no World Heritage Site
        for number, place in enumerate(p for p in places if p["kind"] == "coastal"):
            museum = DBPEDIA[f"{place['label']} Maritime Museum".replace(" ", "_")]
            d.append((museum, DCTERMS.subject, CATEGORY.Museums_in_Florida))
            d.append((museum, OWL_SAMEAS, place["near"]))

    # the stream

    def value(self, station: Station, prop: str, hour: int) -> Literal:
        """The measured value of a property at a station in a given hour (or a truth value)."""
        r, s = self.random, self.scenario
        kind = station.kind
        hit = kind in ("coastal", "heritage")
        if prop == "AirTemperature":
            if kind == "mountain":
                return self.float_literal(r.uniform(15, 28) if hour in s.blizzard else r.uniform(35, 50))
            return self.float_literal(r.uniform(70, 90))
        if prop == "RelativeHumidity":
            return self.float_literal(r.uniform(40, 98))
        if prop in ("WindSpeed", "PeakWindSpeed", "WindGust"):
            extra = 0.0 if prop == "WindSpeed" else r.uniform(3, 12)
            if hit and hour in s.hurricane:
                base = r.uniform(80, 95)
            elif hit and (hour in s.windy_before or hour in s.windy_after):
                base = r.uniform(28, 42)
            elif kind == "mountain" and hour in s.blizzard:
                base = r.uniform(45, 60)
            else:
                base = r.uniform(4, 20)
            return self.float_literal(base + extra)
        if prop == "WindDirection":
            return self.float_literal(r.uniform(0, 359))
        if prop == "PrecipitationAccumulated":
            return self.float_literal(r.uniform(31, 40) if hour in s.heavy_rain else r.uniform(0.5, 9))
        if prop == "Visibility":
            return self.float_literal(r.uniform(2, 8) if hour in s.heavy_rain else r.uniform(1000, 1600))
        if prop == "SnowDepth":
            return self.float_literal(r.uniform(20, 60))
        return Literal("true", datatype=XSD.boolean)

    def observed(self, station: Station, prop: str, hour: int) -> bool:
        """Whether the station reports this property in this hour."""
        s = self.scenario
        if station.broken and hour >= s.breakdown:
            return False
        if prop in ("PrecipitationAccumulated", "PrecipitationSmoothed"):
            return any(hour in interval for interval in s.rain)
        if prop in ("SnowDepth", "SnowSmoothed"):
            return hour in s.blizzard
        return True

    def write_observations(self, stations: list[Station]) -> None:
        for hour in range(self.size.hours):
            for station in stations:
                for number, prop in enumerate(station.properties):
                    if not self.observed(station, prop, hour):
                        continue
                    for sample in range(self.size.rate):
                        minute = (11 * station.index + 7 * number + 3) % (60 // self.size.rate) + sample * (60 // self.size.rate)
                        self.observation(station, prop, self.start + hour * HOUR + minute * MINUTE, hour)

    def observation(self, station: Station, prop: str, instant: int, hour: int) -> None:
        when = from_micros(instant)
        stamp = f"{when.year}_{when.month}_{when.day}_{when.hour}_{when.minute:02d}_00"
        klass, unit = PROPERTIES[prop]
        observation = SENS[f"Observation_{prop}_{station.id}_{stamp}"]
        time = SENS[f"Instant_{stamp}"]
        value = self.value(station, prop, hour)
        result = SENS[f"{'MeasureData' if unit is not None else 'TruthData'}_{prop}_{station.id}_{stamp}"]
        triples = [
            (observation, RDF_TYPE, klass),
            (observation, OM.observedProperty, WEATHER["_" + prop]),
            (observation, OM.procedure, station.system),
            (observation, OM.result, result),
            (observation, OM.samplingTime, time),
            (station.system, OM.generatedObservation, observation),
            (time, RDF_TYPE, OWL_TIME.Instant),
            (time, OWL_TIME.inXSDDateTime, Literal(when.strftime("%Y-%m-%dT%H:%M:%SZ"), datatype=XSD.dateTime)),
        ]
        if unit is not None:
            triples += [(result, RDF_TYPE, OM.MeasureData), (result, OM.floatValue, value), (result, OM.uom, unit)]
        else:
            triples += [(result, RDF_TYPE, OM.TruthData), (result, OM.booleanValue, value)]
        self.stream.extend((s, p, o, instant) for s, p, o in triples)

