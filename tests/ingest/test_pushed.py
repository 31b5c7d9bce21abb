"""What a push over HTTP (``csparql.ingest.pushed``, in process: no Spark) and ``csparql watermark --create`` refuse,
and how they say it: a push names its query parameter ``?timestamp=``, never the command line's option; a stream
is created only under an absolute IRI, and a name that is not one is refused in one line, with nothing stored."""

from __future__ import annotations

import pytest

from csparql.ingest.pushed import PushRefused, land_pushed
from csparql.storage import delta
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import watermark

from ingest.test_ingest import run_cli

STREAM = "http://streams.example.org/pushed"
TRIPLE = "<http://e/car1> <http://e/passes> <http://e/gate1> .\n"
UNTIMED_GRAPH = "<http://e/g1> { <http://e/car1> <http://e/passes> <http://e/gate1> . }\n"
NOT_IRIS = ["../../etc", "javascript:alert(1)", "notaniri"]


def body(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name, text, format, timestamp, said", [
    ("body.nt", TRIPLE, "ntriples", None,
     "the body: ntriples has no timestamps; pass ?timestamp=T to give its triples one"),
    ("body.nt", TRIPLE, "ntriples", "yesterday", "?timestamp: invalid instant 'yesterday'; expected an ISO 8601"),
])
def test_a_push_refused_for_its_timestamp_names_the_query_parameter(tmp_path, name, text, format, timestamp, said):
    with pytest.raises(PushRefused) as refused:
        land_pushed(Warehouse(tmp_path / "warehouse"), STREAM, body(tmp_path, name, text), format,
                    timestamp=timestamp)
    assert refused.value.status == 400 and refused.value.message.startswith(said), refused.value.message
    assert "--timestamp" not in refused.value.message


def test_a_pushed_graph_without_a_timestamp_is_rejected_naming_the_query_parameter(tmp_path):
    outcome = land_pushed(Warehouse(tmp_path / "warehouse"), STREAM, body(tmp_path, "body.trig", UNTIMED_GRAPH),
                          "trig")
    assert outcome.rejected == 1 and outcome.version is None
    [reject] = outcome.rejects
    assert reject["reason"].startswith("graph <http://e/g1>: it has no timestamp") and \
        "add one, or pass ?timestamp=T" in reject["reason"] and "--timestamp" not in reject["reason"]


@pytest.mark.parametrize("name", NOT_IRIS)
def test_a_push_to_a_stream_name_that_is_not_an_absolute_iri_is_refused_and_creates_nothing(tmp_path, name):
    warehouse = Warehouse(tmp_path / "warehouse")
    with pytest.raises(PushRefused) as refused:
        land_pushed(warehouse, name, body(tmp_path, "body.nq", '<http://e/a> <http://e/b> <http://e/c> "5" .\n'),
                    "nquads")
    assert refused.value.status == 400
    assert refused.value.message == (f"'{name}' cannot name a new stream: give an absolute IRI with a scheme and an "
                                     "authority (e.g. http://example.org/stream) or a URN (e.g. urn:example:stream)")
    assert not delta.exists(warehouse.stream(name))


@pytest.mark.parametrize("name", NOT_IRIS)
def test_watermark_create_refuses_a_stream_name_that_is_not_an_absolute_iri(tmp_path, capsys, name):
    warehouse = Warehouse(tmp_path / "warehouse")
    code, out, err = run_cli(capsys, "watermark", "--warehouse", str(warehouse.root), name, "2010-03-22T10:00:00Z",
                             "--create")
    assert (code, out) == (1, "") and len(err.strip().splitlines()) == 1, err
    assert f"'{name}' cannot name a new stream: give an absolute IRI" in err
    assert watermark(warehouse, name) is None
    code, _, _ = run_cli(capsys, "watermark", "--warehouse", str(warehouse.root), "urn:example:quiet",
                         "2010-03-22T10:00:00Z", "--create")
    assert code == 0 and watermark(warehouse, "urn:example:quiet") is not None
