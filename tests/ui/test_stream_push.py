"""Pushing RDF to a stream through the real api-server (``POST /csparql/api/streams/{stream}``): the same events
as TriG, standard N-Quads, JSON-LD and the project's line format land the same rows, and a query over them gives
pyoxigraph's answer; an anonymous push gets 401, a viewer's 403, an oversized body 413 (declared or streamed), a
malformed one 400 with line and reason, an unknown media type 415 — each leaving the stream as it was; a retry
with the same Idempotency-Key lands one copy, and the key used again for another body is refused; a push of late
triples records the windows they make stale and starts the query's revision DAG, as an ingest task does."""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import time

import httpx
import pytest
import rdflib
from rdflib import URIRef

from csparql.deploy.plan import deployment_of
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.storage import delta
from csparql.core.windows import format_instant

from conformance import reference
from ingest.test_timestamped_graphs import (
    BROKEN, QUERY, SECOND, START, as_jsonld, as_lines, as_nquads, as_trig, events, landed,
)
from ui.conftest import PUSH_MAX_BYTES

pytestmark = pytest.mark.airflow

PUSHED = "http://streams.org/pushed/"
MEDIA_TYPES = {"trig": "application/trig", "nquads": "application/n-quads", "json-ld": "application/ld+json",
               "lines": "application/n-quads"}
BODIES = {"trig": as_trig, "nquads": as_nquads, "json-ld": as_jsonld, "lines": as_lines}


def pusher(ui, who: str | None = "admin") -> httpx.Client:
    headers = {"Accept": "application/json"}
    if who is not None:
        headers["Authorization"] = f"Bearer {ui.token(who)}"
    return httpx.Client(base_url=f"{ui.url}/csparql/api/streams", headers=headers, timeout=120)


def segment(stream: str) -> str:
    return quote(stream, safe="")


def version_of(ui, stream: str) -> int | None:
    path = ui.settings.warehouse.stream(stream)
    return delta.open_table(path).version() if delta.exists(path) else None


def test_the_same_events_pushed_in_each_format_land_the_same_rows_and_answer_as_pyoxigraph(ui, spark):
    made = events(seed=21, count=50)
    expected = Counter((s, p, o, at) for _, at, triples in made for s, p, o in triples)
    with pusher(ui) as client:
        for name, body in BODIES.items():
            stream = PUSHED + name
            answer = client.post(segment(stream), content=body(made).encode("utf-8"),
                                 headers={"Content-Type": MEDIA_TYPES[name]})
            assert answer.status_code == 201, (name, answer.text)
            result = answer.json()
            assert result["landed"] == 2 * len(made) and result["replayed"] is False, result
            assert result["version"] == version_of(ui, stream), result
            assert landed(ui.settings.warehouse.stream(stream)) == expected, name
    query = QUERY.replace("http://streams.org/milantollgates.trdf", PUSHED + "trig")
    plan = compile_query(query)
    truth_stream = [(URIRef(s), URIRef(p), URIRef(o) if o.startswith("http://") else rdflib.Literal(o), at)
                    for _, at, triples in made for s, p, o in triples]
    for minute in (1, 2, 3):
        at = START + minute * 60 * SECOND
        ours = Engine(ui.settings.warehouse, spark).evaluate(plan, at, "pushed", write=False).result
        truth = reference.evaluate(reference.Case("pushed", query, {URIRef(PUSHED + "trig"): truth_stream}, {}, at))
        assert truth.rows, minute
        assert Counter(tuple(map(str, row)) for row in ours.rows) == Counter(
            tuple(map(str, row)) for row in truth.rows), minute


def test_refused_pushes_leave_the_stream_as_it_was(ui):
    stream = PUSHED + "refused"
    good = as_trig(events(seed=22, count=5)).encode("utf-8")
    trig = {"Content-Type": "application/trig"}
    with pusher(ui) as admin:
        assert admin.post(segment(stream), content=good, headers=trig).status_code == 201
    before = version_of(ui, stream)
    rows = landed(ui.settings.warehouse.stream(stream))

    with pusher(ui, None) as anonymous:
        assert anonymous.post(segment(stream), content=good, headers=trig).status_code == 401
    with pusher(ui, "viewer") as viewer:
        refused = viewer.post(segment(stream), content=good, headers=trig)
        assert refused.status_code == 403 and "push to" in refused.json()["detail"], refused.text
    with pusher(ui) as admin:
        oversized = b"#" * (PUSH_MAX_BYTES + 1)
        declared = admin.post(segment(stream), content=oversized, headers=trig)
        assert declared.status_code == 413 and "push_max_bytes" in declared.json()["detail"], declared.text

        def chunks():  # no Content-Length: the server counts as it reads
            for start in range(0, len(oversized), 1 << 16):
                yield oversized[start:start + (1 << 16)]

        streamed = admin.post(segment(stream), content=chunks(), headers=trig)
        assert streamed.status_code == 413, streamed.text
        malformed = admin.post(segment(stream), content=BROKEN.encode("utf-8"), headers=trig)
        assert malformed.status_code == 400, malformed.text
        problem = malformed.json()
        assert problem["rejected"] == 5 and "nothing landed" in problem["detail"], problem
        assert [r["line"] for r in problem["rejects"]] == [0, 6, 7, 9, 11], problem
        assert problem["rejects"][1]["reason"].startswith("graph <http://ex.org/untimed>: it has no timestamp")
        lines = b'<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> "2010-03-22T10:00:00Z" .\nnot a triple\n'
        bad_line = admin.post(segment(stream), content=lines, headers={"Content-Type": "application/n-quads"})
        assert bad_line.status_code == 400 and bad_line.json()["rejects"][0]["line"] == 2, bad_line.text
        unknown = admin.post(segment(stream), content=good, headers={"Content-Type": "text/plain"})
        assert unknown.status_code == 415 and "application/trig" in unknown.json()["detail"], unknown.text
    assert version_of(ui, stream) == before
    assert landed(ui.settings.warehouse.stream(stream)) == rows


def test_a_retried_push_lands_once_and_a_reused_key_is_refused(ui):
    stream = PUSHED + "retried"
    body = as_trig(events(seed=23, count=8)).encode("utf-8")
    headers = {"Content-Type": "application/trig", "Idempotency-Key": "batch-0001"}
    with pusher(ui) as admin:
        first = admin.post(segment(stream), content=body, headers=headers)
        assert first.status_code == 201, first.text
        again = admin.post(segment(stream), content=body, headers=headers)
        assert again.status_code == 200, again.text
        same = ("stream", "landed", "version", "watermark")
        assert [again.json()[k] for k in same] == [first.json()[k] for k in same]
        assert again.json()["replayed"] is True
        other = as_trig(events(seed=24, count=3)).encode("utf-8")
        reused = admin.post(segment(stream), content=other, headers=headers)
        assert reused.status_code == 409 and "batch-0001" in reused.json()["detail"], reused.text
    assert version_of(ui, stream) == first.json()["version"]
    assert sum(landed(ui.settings.warehouse.stream(stream)).values()) == first.json()["landed"] == 16


def test_a_late_push_records_the_windows_it_makes_stale_and_starts_their_revision(ui, spark):
    stream, name = PUSHED + "late", "pushed_late"
    text = (f"REGISTER QUERY PushedLate COMPUTED EVERY 1m AS\nPREFIX ex: <http://ex.org/>\n"
            f"SELECT (COUNT(?car) AS ?cars)\nFROM STREAM <{stream}> [RANGE 1m STEP 1m]\n"
            "WHERE { ?gate ex:registers ?car . }\n")
    minute = 60_000_000
    end = (time.time_ns() // 1000 // minute - 2) * minute  # a window that closed two minutes ago, or three

    def body(car: str, at: int) -> bytes:
        return (f'<http://ex.org/gate1> <http://ex.org/registers> <http://ex.org/{car}> '
                f'"{at // 1000}" .\n').encode("utf-8")

    nquads = {"Content-Type": "application/n-quads"}
    with pusher(ui) as admin:
        assert admin.post(segment(stream), content=body("on-time", end - 30_000_000), headers=nquads).status_code == 201
        registered = httpx.post(f"{ui.url}/csparql/queries", data={"name": name, "text": text}, timeout=60,
                                headers={"Authorization": f"Bearer {ui.token()}", "Accept": "application/json"})
        assert registered.status_code == 200, registered.text
        # the revision DAGs, as a deployment's DAG factory builds them (this stack parses only query loaders)
        (ui.stack.dags / "csparql_revisions.py").write_text(
            "# an Airflow DAG file (its safe mode reads only files that say so)\n"
            "from csparql.orchestration.revisions import revision_dags\n\nglobals().update(revision_dags())\n")
        ui.stack.wait_for_dags([name, f"revise_{name}"])
        # the event is what is checked here: a paused revision DAG keeps it queued instead of running Spark
        ui.stack.api("PATCH", f"dags/revise_{name}", {"is_paused": True})
        deployment = deployment_of(ui.settings.registry / f"{name}.rq", ui.settings)
        Engine(ui.settings.warehouse, spark).evaluate(deployment.plan, end, name, version=deployment.version)
        late = admin.post(segment(stream), content=body("late", end - 20_000_000), headers=nquads)
    assert late.status_code == 201, late.text
    assert late.json()["stale_windows"] == 1 and late.json()["revised_by"] == [name], late.json()
    events = ui.stack.api("GET", "assets/events?limit=100&order_by=-timestamp")["asset_events"]
    revisions = [e for e in events if e["uri"] == f"csparql://revisions/{name}"]
    assert [e["extra"]["windows"] for e in revisions] == [[format_instant(end)]], events
