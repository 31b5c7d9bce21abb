"""What the page says after *Trigger a run*: the redirect names the run it created, and the page it lands on
links to that Airflow run and to its task's log, through the same views and templates the pages use (a
Starlette request as the api-server builds it; no Airflow needed for the answer itself)."""

from __future__ import annotations

import re

from starlette.requests import Request

from csparql.web.views import done, page

RUN_ID = "manual__csparql__2010-03-22T08:50:00Z__a1b2c3"


def request(path: str, query: str = "") -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "root_path": "/csparql",
                    "query_string": query.encode(), "headers": [(b"accept", b"text/html")]})


def test_after_trigger_a_run_the_page_links_to_the_airflow_run_and_its_log():
    answer = done(request("/csparql/queries/tollgates/trigger"), "/queries/tollgates", "triggered",
                  {"name": "tollgates", "run_id": RUN_ID})
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith("/csparql/queries/tollgates?done=triggered&run=")

    path, _, query = location.partition("?")
    html = page(request(path, query), "refused.html", status=200, name="tollgates", message="")
    quoted = "manual__csparql__2010-03-22T08%3A50%3A00Z__a1b2c3"
    assert re.search(rf'href="/dags/tollgates/runs/{quoted}"[^>]*id="triggered-run"', html.body.decode())
    assert f'href="/dags/tollgates/runs/{quoted}/tasks/evaluate_window"' in html.body.decode()


def test_a_run_id_given_in_the_address_is_escaped_not_markup():
    html = page(request("/csparql/queries/q", 'done=triggered&run=%22%3E%3Cscript%3Ex%3C/script%3E'),
                "refused.html", name="q", message="").body.decode()
    assert "<script>x" not in html
