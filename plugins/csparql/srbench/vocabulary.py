"""The names SRBench uses (SRBench, §4.1): namespaces, the stream and its static graphs, and the classes and
properties of the sensor-observation, weather, GeoNames and DBpedia vocabularies that the queries read.

``wgs84_pos`` is the W3C namespace *with* its ``#`` (SRBench's §4.1 and §6 print it without one, which would make
``wgs84_pos:lat`` the IRI ``…/wgs84_poslat``; the data and the queries here use the real namespace).
"""

from __future__ import annotations

from rdflib import Namespace, URIRef

from csparql.storage import vocabulary

OM = Namespace("http://knoesis.wright.edu/ssw/ont/sensor-observation.owl#")
WEATHER = Namespace("http://knoesis.wright.edu/ssw/ont/weather.owl#")
SENS = Namespace("http://knoesis.wright.edu/ssw/")
GN = Namespace("http://www.geonames.org/ontology#")
WGS84 = Namespace("http://www.w3.org/2003/01/geo/wgs84_pos#")
OWL_TIME = Namespace("http://www.w3.org/2006/time#")
DBPEDIA = Namespace("http://dbpedia.org/resource/")
DBPPROP = Namespace("http://dbpedia.org/property/")
DBPEDIA_ONTOLOGY = Namespace("http://dbpedia.org/ontology/")
CATEGORY = Namespace("http://dbpedia.org/resource/Category:")
YAGO = Namespace("http://dbpedia.org/class/yago/")
DCTERMS = Namespace("http://purl.org/dc/terms/")
SKOS = Namespace("http://www.w3.org/2004/02/skos/core#")
FOAF = Namespace("http://xmlns.com/foaf/0.1/")
GEONAMES = Namespace("http://sws.geonames.org/")
WIKIDATA = Namespace("http://www.wikidata.org/entity/")
MESOWEST = "http://mesowest.utah.edu/cgi-bin/droman/meso_base.cgi?stn="

RDF_TYPE = URIRef(vocabulary.RDF_TYPE)
RDFS_SUBCLASSOF = URIRef(vocabulary.RDFS_SUBCLASSOF)
RDFS_SUBPROPERTYOF = URIRef(vocabulary.RDFS_SUBPROPERTYOF)
OWL_SAMEAS = URIRef(vocabulary.OWL_SAMEAS)
XSD = Namespace(vocabulary.XSD)

# The stream and the static graphs, as the queries name them (SRBench, §6), plus the graph of the ontologies.
OBSERVATIONS = URIRef("http://www.cwi.nl/SRBench/observations")
SENSORS = URIRef("http://www.cwi.nl/SRBench/sensors")
GEONAMES_GRAPH = URIRef("http://www.cwi.nl/SRBench/geonames")
DBPEDIA_GRAPH = URIRef("http://www.cwi.nl/SRBench/dbpedia")
ONTOLOGY = URIRef("http://www.cwi.nl/SRBench/ontology")
STATIC_GRAPHS = (SENSORS, GEONAMES_GRAPH, DBPEDIA_GRAPH, ONTOLOGY)
