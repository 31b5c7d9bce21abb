"""The C-SPARQL pages' endpoints against the real api-server: no login gets 401 on every route, a viewer may
read but not change the registry, cross-site changes are refused, names with path tricks are refused, and bad
input gets a clear message while nothing changes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from starlette.routing import Route

from csparql.deploy.history import versions
from csparql.web.app import SAFE_METHODS, create_app

TOLLGATES = """REGISTER QUERY EndpointTollgates AS
# a comment that tries to close the page: </pre><script>document.title = "pwned"</script>
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?tollgate (COUNT(?car) AS ?passages)
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 10m STEP 10m]
WHERE { ?tollgate t:registers ?car . }
GROUP BY ?tollgate
"""
PATH_VALUES = {"name": "endpoint_tollgates", "number": "1", "dag_id": "some_dag",
               "stream": "http%3A%2F%2Fstreams.org%2Fmilantollgates.trdf"}
FOREIGN_ORIGIN = "http://evil.example"
PUSHED_TRIPLE = b'<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> "2010-03-22T08:10:00Z" .\n'


def client(ui, token: str | None = None, cookie: str | None = None, origin: str | None = None) -> httpx.Client:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if origin:
        headers["Origin"] = origin
    cookies = {"_token": cookie} if cookie else None
    return httpx.Client(base_url=f"{ui.url}/csparql", headers=headers, cookies=cookies, timeout=60,
                        follow_redirects=False)


def registry_state(ui) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(ui.settings.registry.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def registered(ui):
    """A query registered through the API by the admin (the viewer's refusals must leave it as it is)."""
    with client(ui, ui.token()) as admin:
        answer = admin.post("/queries", data={"name": "endpoint_tollgates", "text": TOLLGATES})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"ok": True, "done": "registered", "name": "endpoint_tollgates"}
    return "endpoint_tollgates"


def every_route() -> list[tuple[str, str]]:
    """(method, path) of every route of the app, with sample path parameters."""
    routes = []
    for route in create_app().routes:
        if not isinstance(route, Route):
            continue
        values = {**PATH_VALUES, "name": "csparql.css"} if route.path.startswith("/static/") else PATH_VALUES
        path = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values[m.group(1)], route.path)
        routes.extend((method, path) for method in sorted(route.methods) if method != "HEAD")
    return routes


def test_every_page_and_endpoint_answers_401_without_a_login(ui, registered):
    routes = every_route()
    assert len(routes) >= 18 and ("POST", "/api/check") in routes and ("GET", "/static/csparql.css") in routes
    routes += [("GET", "/no/such/page"), ("GET", "/static/editor.js"), ("DELETE", "/queries/endpoint_tollgates")]
    with client(ui) as anonymous, client(ui, cookie="not-a-token") as forged, client(ui, token="x.y.z") as bad:
        for method, path in routes:
            for who in (anonymous, forged, bad):
                answer = who.request(method, path, data={"text": TOLLGATES} if method == "POST" else None)
                assert answer.status_code == 401, (method, path, answer.status_code, answer.text)
    with httpx.Client(base_url=f"{ui.url}/csparql", timeout=60) as browser:
        page = browser.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 401 and "Log in to Airflow" in page.text and page.headers["www-authenticate"] == "Bearer"
    assert "frame-ancestors 'self'" in page.headers["content-security-policy"]  # no framing by other sites


def test_a_viewer_reads_every_page_but_cannot_change_the_registry(ui, registered):
    before = registry_state(ui)
    with client(ui, ui.token("viewer")) as viewer:
        for path in ("/", "/register", "/streams", f"/queries/{registered}", f"/queries/{registered}/versions/1",
                     "/dags/some_dag", f"/dags/{registered}", "/api/queries", f"/api/queries/{registered}",
                     "/static/csparql.css"):
            assert viewer.get(path).status_code == 200, path
        register_page = viewer.get("/register", headers={"Accept": "text/html"}).text
        assert "a C-SPARQL or an RSP-QL query" in register_page  # both dialects are accepted there
        assert viewer.post("/api/check", json={"text": TOLLGATES}).json()["ok"] is True  # checking changes nothing
        changes = [
            ("/queries", {"name": "viewer_query", "text": TOLLGATES.replace("EndpointTollgates", "Viewer")}),
            (f"/queries/{registered}", {"text": TOLLGATES.replace("10m", "20m")}),
            (f"/queries/{registered}/pause", {}),
            (f"/queries/{registered}/unpause", {}),
            (f"/queries/{registered}/trigger", {"window_end": "2010-03-22T08:30:00Z"}),
            (f"/queries/{registered}/delete", {"confirm": registered, "drop_results": "yes"}),
        ]
        for path, form in changes:
            answer = viewer.post(path, data=form)
            assert answer.status_code == 403, (path, answer.text)
            assert "needs a user allowed to edit DAGs" in answer.json()["detail"]
        shown = viewer.get(f"/queries/{registered}", headers={"Accept": "text/html"})
        page = shown.text
    policy = shown.headers["content-security-policy"]
    assert shown.headers["x-frame-options"] == "SAMEORIGIN" and "default-src 'self'" in policy and "unsafe" not in policy
    assert 'id="edit"' not in page and 'id="trigger"' not in page and 'id="delete"' not in page
    assert registry_state(ui) == before


def test_changes_authenticated_by_the_cookie_must_come_from_this_site(ui, registered):
    token = ui.token()
    text = {"text": TOLLGATES}
    with client(ui, cookie=token) as no_origin:
        assert no_origin.post("/api/check", json=text).status_code == 403
        assert no_origin.get("/api/queries").status_code == 200  # reading is fine
    with client(ui, cookie=token, origin="http://evil.example") as foreign:
        answer = foreign.post("/api/check", json=text)
        assert answer.status_code == 403 and "does not come from a page of this site" in answer.json()["detail"]
    with client(ui, cookie=token, origin=ui.url) as same_site:
        assert same_site.post("/api/check", json=text).status_code == 200
    with client(ui, cookie=token) as referred:
        answer = referred.post("/api/check", json=text, headers={"Referer": f"{ui.url}/csparql/register"})
        assert answer.status_code == 200


def not_bearer_tokens(token: str) -> dict[str, str]:
    """Authorization headers Airflow does not read as a bearer token, so its cookie authenticates a request
    that carries one (named for the messages): other schemes, a bare ``Bearer``, garbage, and even a valid
    token after a tab (Airflow splits the scheme from the token at a space)."""
    return {"Basic": "Basic Zm9vOmJhcg==", "Token": "Token abc", "bare Bearer": "Bearer", "garbage": "garbage",
            "Negotiate": "Negotiate", "Bearer, a tab, a valid token": f"Bearer\t{token}"}


def airflow_state_of(ui, name: str) -> tuple[bool, list[str]]:
    """Whether Airflow has the DAG paused, and its runs."""
    return (ui.stack.api("GET", f"dags/{name}")["is_paused"],
            [run["dag_run_id"] for run in ui.stack.dag_runs(name)])


def test_a_cookie_change_from_another_site_is_refused_whatever_authorization_header_comes_with_it(ui, registered):
    token = ui.token()
    new_query = {"name": "cross_site", "text": TOLLGATES.replace("EndpointTollgates", "CrossSite")}
    changes = {
        ("POST", "/api/check"): {"json": {"text": TOLLGATES}},
        ("POST", "/queries"): {"data": new_query},
        ("POST", f"/queries/{registered}"): {"data": {"text": TOLLGATES.replace("10m", "20m")}},
        ("POST", f"/queries/{registered}/pause"): {},
        ("POST", f"/queries/{registered}/unpause"): {},
        ("POST", f"/queries/{registered}/trigger"): {"data": {"window_end": "2010-03-22T08:30:00Z"}},
        ("POST", f"/queries/{registered}/delete"): {"data": {"confirm": registered, "drop_results": "yes"}},
        ("POST", f"/api/streams/{PATH_VALUES['stream']}"): {"content": PUSHED_TRIPLE},
    }
    assert set(changes) == {(method, path) for method, path in every_route() if method not in SAFE_METHODS}
    ui.stack.wait_for_dags([registered])  # so that a pause, unpause or trigger let through would take effect
    registry_before, airflow_before = registry_state(ui), airflow_state_of(ui, registered)
    assert airflow_before[0] is True  # new DAGs start paused: an unpause let through would show
    let_through = []
    with client(ui, cookie=token) as browser:  # the admin's cookie, which may change everything
        for (method, path), body in changes.items():
            for kind, authorization in not_bearer_tokens(token).items():
                for origin in (FOREIGN_ORIGIN, None):
                    headers = {"Authorization": authorization} | ({"Origin": origin} if origin else {})
                    answer = browser.request(method, path, headers=headers, **body)
                    if answer.status_code != 403 or "does not come from a page of this site" not in answer.text:
                        let_through.append((method, path, kind, origin, answer.status_code))
    assert let_through == []
    assert registry_state(ui) == registry_before
    assert airflow_state_of(ui, registered) == airflow_before


def test_a_bearer_token_authenticates_a_change_from_anywhere_and_the_cookie_beside_it_does_not_count(ui, registered):
    admin, viewer = ui.token(), ui.token("viewer")
    text = {"text": TOLLGATES}
    with client(ui, cookie=viewer) as browser:  # the cookie of a user who may not change the registry
        for origin in (FOREIGN_ORIGIN, None):
            headers = {"Origin": origin} if origin else {}
            for scheme in ("Bearer", "bearer", "BEARER"):  # Airflow reads the scheme in any case
                answer = browser.post("/api/check", json=text, headers=headers | {"Authorization": f"{scheme} {admin}"})
                assert answer.status_code == 200, (origin, scheme, answer.text)
        headers = {"Origin": FOREIGN_ORIGIN, "Authorization": f"bearer {admin}"}
        new_query = {"name": "from_anywhere", "text": TOLLGATES.replace("EndpointTollgates", "FromAnywhere")}
        added = browser.post("/queries", headers=headers, data=new_query)
        assert added.json() == {"ok": True, "done": "registered", "name": "from_anywhere"}
        assert versions("from_anywhere", ui.settings)[-1].saved_by == "admin"
        deleted = browser.post("/queries/from_anywhere/delete", headers=headers, data={"confirm": "from_anywhere"})
        assert deleted.json()["done"] == "deleted"
    with client(ui, cookie=admin, origin=FOREIGN_ORIGIN) as browser:
        refused = browser.post(f"/queries/{registered}/pause", headers={"Authorization": f"Bearer {viewer}"})
        assert refused.status_code == 403 and "needs a user allowed to edit DAGs" in refused.json()["detail"]
        forged = browser.post("/api/check", json=text, headers={"Authorization": "Bearer x.y.z"})
        assert forged.status_code == 401  # a bearer token that is not valid is not made good by the cookie


def test_names_with_path_tricks_are_refused_and_change_nothing(ui, registered):
    before = registry_state(ui)
    with client(ui, ui.token()) as admin:
        for name in ("../x", "../../etc/passwd", "x/y", ".history", "x.rq", "x y", "x\ny"):
            answer = admin.post("/queries", data={"name": name, "text": TOLLGATES})
            assert answer.status_code == 400, (name, answer.text)
            assert "cannot name a registered query" in answer.json()["detail"]
        for path in ("/queries/..%2Fx", "/queries/..%2F..%2Fregistry/edit", "/queries/.history/versions/1",
                     "/queries/x.rq/delete"):
            for method in ("GET", "POST"):
                answer = admin.request(method, path, data={"confirm": "x"} if method == "POST" else None)
                assert answer.status_code in (400, 404, 405), (method, path, answer.status_code)
        html = admin.post("/queries", data={"name": "../x", "text": TOLLGATES}, headers={"Accept": "text/html"})
    assert html.status_code == 400 and "&#39;../x&#39; cannot name a registered query" in html.text
    assert registry_state(ui) == before


def test_bad_input_gets_a_clear_message_and_changes_nothing(ui, registered):
    before = registry_state(ui)
    broken = TOLLGATES.replace("?tollgate t:registers ?car .", "?tollgate t:registers .")
    with client(ui, ui.token()) as admin:
        answer = admin.post("/queries", data={"name": "broken", "text": broken})
        assert answer.status_code == 400
        assert "line 6, column 31: unexpected '.'" in answer.json()["detail"]
        edit = admin.post(f"/queries/{registered}", data={"text": broken})
        assert edit.status_code == 400 and "the change was not saved: line 6, column 31" in edit.json()["detail"]
        again = admin.post("/queries", data={"name": registered, "text": TOLLGATES})
        assert again.status_code == 409 and "already registered" in again.json()["detail"]
        when = admin.post(f"/queries/{registered}/trigger", data={"window_end": "yesterday"})
        assert when.status_code == 400 and "window end: invalid instant 'yesterday'" in when.json()["detail"]
        unconfirmed = admin.post(f"/queries/{registered}/delete", data={})
        assert unconfirmed.status_code == 400 and "nothing was deleted" in unconfirmed.json()["detail"]
        checked = admin.post("/api/check", content=b"not json", headers={"Content-Type": "application/json"})
        assert checked.status_code == 400 and "send a JSON object" in checked.json()["detail"]
        upload = admin.post("/queries", data={"name": "latin1"}, files={"upload": ("q.rq", "é".encode("latin-1"))})
        assert upload.status_code == 400 and "is not UTF-8 text" in upload.json()["detail"]
        missing = admin.get("/queries/no_such_query")
        assert missing.status_code == 404 and "no query is registered as no_such_query" in missing.json()["detail"]
    assert registry_state(ui) == before


def test_names_sql_would_confuse_with_another_query_or_a_warehouse_table_are_refused(ui, registered):
    before = registry_state(ui)
    with client(ui, ui.token()) as admin:
        for name, message in (
            (registered.upper(), f"'{registered.upper()}' collides with the registered query {registered}"),
            (f"{registered}_answers", f"collides with the registered query {registered}"),
            ("Runs", "'Runs' cannot name a query: its results would be the SQL table runs"),
            ("stream_tollgates", "'stream_tollgates' cannot name a query"),
        ):
            answer = admin.post("/queries", data={"name": name, "text": TOLLGATES})
            assert answer.status_code == 400 and message in answer.json()["detail"], (name, answer.text)
            checked = admin.post("/api/check", json={"text": TOLLGATES, "name": name}).json()
            assert checked["ok"] is False and message in checked["problems"][0]["message"]
    assert registry_state(ui) == before


def test_queries_beyond_the_limits_get_their_problems_not_a_server_error(ui, registered):
    before = registry_state(ui)
    nested = TOLLGATES.replace("WHERE { ?tollgate t:registers ?car . }",
                               "WHERE " + "{ " * 500 + "?tollgate t:registers ?car ." + " }" * 500)
    forever = TOLLGATES.replace("[RANGE 10m STEP 10m]", "[RANGE 99999999999999999999d STEP 10m]")
    patterns = TOLLGATES.replace("?car . }", "?car . ?tollgate t:sees 1" + ",1" * 99_800 + " }")  # under 200,000 characters
    with client(ui, ui.token()) as admin:
        for text, message, line in ((nested, "the query nests more than 64 levels deep here", 6),
                                    (forever, "the window RANGE is longer than 36525d (100 years)", 5),
                                    (patterns, "the query has more than 30,000 terms", 6)):
            checked = admin.post("/api/check", json={"text": text})
            assert checked.status_code == 200, checked.text
            answer = checked.json()
            assert answer["ok"] is False and answer["problems"][0]["message"].startswith(message)
            assert answer["problems"][0]["line"] == line and len(checked.content) < 5000
            saved = admin.post("/queries", data={"name": "too_deep", "text": text})
            assert saved.status_code == 400 and message in saved.json()["detail"]
        when = admin.post(f"/queries/{registered}/trigger", data={"window_end": "0001-01-01T00:00:00Z"})
        assert when.status_code == 400 and "is outside the instants csparql evaluates" in when.json()["detail"]
    assert registry_state(ui) == before


def test_query_text_is_escaped_everywhere_it_is_shown(ui, registered):
    with client(ui, ui.token()) as admin:
        pages = [admin.get(path, headers={"Accept": "text/html"}).text
                 for path in (f"/queries/{registered}", f"/queries/{registered}/versions/1", f"/queries/{registered}/edit")]
    for html in pages:
        assert '<script>document.title = "pwned"</script>' not in html
        assert "&lt;/pre&gt;&lt;script&gt;document.title" in html
        assert "&lt;http://streams.org/milantollgates.trdf&gt;" in html


def test_editing_records_a_new_version_and_deleting_asks_first_and_keeps_results_unless_told(ui, registered):
    from csparql.storage import delta, schema

    import pyarrow as pa

    with client(ui, ui.token()) as admin:
        for name in ("doomed", "doomed_with_results"):
            text = TOLLGATES.replace("EndpointTollgates", name.title().replace("_", ""))
            assert admin.post("/queries", data={"name": name, "text": text}).status_code == 200
            assert admin.post(f"/queries/{name}", data={"text": text.replace("10m", "20m")}).json()["done"] == "saved"
            assert [v.number for v in versions(name, ui.settings)] == [1, 2]
            results = ui.settings.warehouse.results(name, "answers")
            delta.append(results, pa.Table.from_pylist([], schema=schema.ANSWERS), schema.ANSWERS)
        confirm_page = admin.get("/queries/doomed/delete", headers={"Accept": "text/html"})
        assert confirm_page.status_code == 200 and 'name="confirm" value="doomed"' in confirm_page.text
        assert admin.post("/queries/doomed/delete", data={"confirm": "doomed"}).json()["results_dropped"] == []
        dropped = admin.post("/queries/doomed_with_results/delete",
                             data={"confirm": "doomed_with_results", "drop_results": "yes"}).json()
    assert dropped["ok"] and len(dropped["results_dropped"]) == 1
    assert not (ui.settings.registry / "doomed.rq").exists() and not (ui.settings.registry / "doomed.py").exists()
    assert delta.exists(ui.settings.warehouse.results("doomed", "answers"))  # kept unless told otherwise
    assert not (ui.settings.warehouse.root / "results" / "doomed_with_results").exists()
    assert [v.number for v in versions("doomed", ui.settings)] == [1, 2]  # the history stays


def test_a_dag_that_is_not_a_query_says_so(ui):
    with client(ui, ui.token()) as admin:
        page = admin.get("/dags/ingest_something", headers={"Accept": "text/html"})
        odd = admin.get("/dags/<script>", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "Not a C-SPARQL query" in page.text and "ingestion DAG" in page.text
    assert odd.status_code in (400, 404) and "<script>" not in odd.text


RSPQL = """PREFIX t: <http://linkedurbandata.org/traffic#>
REGISTER RSTREAM <http://example.org/EndpointGates> AS
SELECT ?gate (COUNT(?car) AS ?cars)
FROM NAMED WINDOW <w> ON STREAM <http://streams.org/milantollgates.trdf> [RANGE 600000 STEP 300000]
WHERE { WINDOW <w> { ?gate t:registers ?car . } }
GROUP BY ?gate
"""


def test_the_register_endpoints_take_rspql_as_they_take_csparql(ui, registered):
    """The editor's check, registering and the query's JSON, through the real api-server, for a
    query in rsp-rs's spelling (ON STREAM, milliseconds); a broken one gets its line and column, and nothing
    is stored for it."""
    with client(ui, ui.token()) as admin:
        checked = admin.post("/api/check", json={"text": RSPQL}).json()
        assert checked["ok"] is True and checked["name"] == "EndpointGates" and checked["schedule"] == "every 5m"
        assert checked["streams"] == [{"iri": "http://streams.org/milantollgates.trdf", "window": "RANGE 10m STEP 5m"}]
        before = registry_state(ui)
        broken = RSPQL.replace("WINDOW <w> {", "WINDOW <v> {")
        refused = admin.post("/queries", data={"name": "endpoint_gates", "text": broken})
        assert refused.status_code == 400 and "line 5, column 16" in refused.json()["detail"]
        assert "the window <v> is not declared" in refused.json()["detail"] and registry_state(ui) == before
        answer = admin.post("/queries", data={"name": "endpoint_gates", "text": RSPQL})
        assert answer.status_code == 200 and answer.json()["done"] == "registered", answer.text
        assert (ui.settings.registry / "endpoint_gates.rq").read_text(encoding="utf-8") == RSPQL
        shown = admin.get("/api/queries/endpoint_gates")
        assert shown.status_code == 200 and shown.json()["version"] == 1, shown.text
        assert [lag["stream"] for lag in shown.json()["lags"]] == ["http://streams.org/milantollgates.trdf"]
        assert admin.post("/queries/endpoint_gates/delete", data={"confirm": "endpoint_gates"}).json()["ok"]
    assert not (ui.settings.registry / "endpoint_gates.rq").exists()
