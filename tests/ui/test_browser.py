"""A data engineer in a real browser (Debian's Chromium driven by Playwright) against the real api-server:
log in to Airflow, open Browse → C-SPARQL, register a query with a mistake and see it marked at its line,
fix it, save it, watch its DAG appear, unpause it, trigger runs, and see the windows, result rows and charts;
the DAG's "Query" tab and the streams page too. A screenshot of each page is saved in
``tests/artifacts/screenshots/``.

The result rows shown are compared with counts made directly from the sample stream file (not with what
csparql computed)."""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from support import tool_missing
from ui.conftest import MILAN

pytestmark = [pytest.mark.airflow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGUMENTS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NAME = "ui_tollgates"
QUERY = """REGISTER QUERY CarsPerTollgate COMPUTED EVERY 10m AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?tollgate (COUNT(?car) AS ?passages)
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 10m STEP 10m]
WHERE { ?tollgate t:registers ?car . }
GROUP BY ?tollgate
"""
MISTAKE = QUERY.replace("?tollgate t:registers ?car .", "?tollgate t:registers ?car ?extra .")  # line 5
WINDOWS = ["2010-03-22T08:30:00Z", "2010-03-22T08:40:00Z", "2010-03-22T08:50:00Z"]
LINE = re.compile(r'^<([^>]+)> <([^>]+)> <([^>]+)> "([^"]+)"\^\^<[^>]+> \.$')


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright (which cannot download a browser of its own here)."""
    executable = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if executable is None:
        tool_missing("Chromium is needed for the browser tests: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGUMENTS)
        yield chromium
        chromium.close()


def expected_passages(ui, window_end: str) -> dict[str, int]:
    """Distinct cars per tollgate in the window (end − 10m, end], counted from the sample file itself."""
    from csparql.core.windows import parse_instant

    end = parse_instant(window_end)
    cars = defaultdict(set)
    for line in ui.files.streams[MILAN].read_text().splitlines():
        match = LINE.match(line.strip())
        if match and match[2] == "http://linkedurbandata.org/traffic#registers":
            if end - 600_000_000 < parse_instant(match[4]) <= end:
                cars[match[1]].add(match[3])
    return {gate: len(seen) for gate, seen in cars.items()}


def test_register_watch_and_run_a_query_from_the_airflow_ui(browser, ui, screenshots):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(60_000)
    elsewhere = []  # the pages work offline: nothing is fetched from anywhere but the api-server
    page.on("request", lambda request: None if request.url.startswith((ui.url, f"blob:{ui.url}", "data:", "about:"))
            else elsewhere.append(request.url))
    # Log in to Airflow as a user does.
    page.goto(f"{ui.url}/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(ui.stack.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{ui.url}/")

    # Browse → C-SPARQL: the pages open inside Airflow's UI.
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="C-SPARQL").click()
    frame = page.frame_locator("iframe[title='C-SPARQL']")
    frame.get_by_role("heading", name="Registered queries").wait_for()
    page.screenshot(path=screenshots / "01-queries.png")

    # Register: the mistake is marked at line 5 while typing, and saving is impossible until it is fixed.
    frame.get_by_role("link", name="Register a query").first.click()
    editor = frame.locator("#query-text")
    editor.fill(MISTAKE)
    marked = frame.locator("#gutter div.error")
    marked.wait_for()
    assert marked.all_inner_texts() == ["5"]
    problem = frame.locator("#problems li").first
    assert problem.inner_text().startswith("Line 5, column 36: unexpected '?extra'")
    assert frame.locator("#backdrop mark.error").inner_text() == "?extra"
    assert frame.locator("#save").is_disabled()
    page.screenshot(path=screenshots / "02-register-with-a-mistake.png")

    frame.locator("#upload").set_input_files(files=[{"name": "tollgates.rq", "mimeType": "text/plain",
                                                      "buffer": QUERY.encode()}])  # the fixed query, uploaded
    frame.locator("#check-status.ok").wait_for()
    assert editor.input_value() == QUERY
    assert frame.locator("#gutter div.error").count() == 0
    assert frame.locator("#next-runs tbody tr").count() == 5  # the next windows, every 10 minutes
    assert "(group" in frame.locator("#plan").inner_text()
    frame.locator("#name").fill(NAME)
    page.screenshot(path=screenshots / "03-register-valid.png")
    frame.locator("#save").click()

    # The query page waits for the DAG processor, then shows the new DAG (paused, as new DAGs start).
    frame.locator("#query-name").wait_for()
    assert frame.locator("#query-name").inner_text() == NAME
    # the DAG processor lists new files every 5 s and then parses them: the page shown right after saving
    # comes before that
    assert "Waiting for Airflow's DAG processor to parse ui_tollgates.py" in frame.locator("#waiting-for-dag").inner_text()
    page.screenshot(path=screenshots / "04-registered.png")
    frame.locator("#dag-state", has_text="paused").wait_for(timeout=300_000)  # the page refreshes by itself
    assert ui.stack.api("GET", f"dags/{NAME}")["is_paused"] is True
    assert (ui.settings.registry / f"{NAME}.rq").read_text() == QUERY

    # Unpause, and trigger the windows of the sample hour.
    frame.locator("#unpause").click()
    frame.locator("#dag-state", has_text="active").wait_for()
    for window_end in WINDOWS:
        frame.locator("#trigger-at").fill(window_end)
        assert frame.locator("#trigger-at").input_value() == window_end  # the page does not reload under you
        frame.locator("#trigger").click()
        frame.locator(f'#windows tr[data-window-end="{window_end}"]').wait_for()  # its run shows at once
    for window_end in WINDOWS:
        frame.locator(f'#windows tr[data-window-end="{window_end}"][data-state="complete"]').wait_for(timeout=900_000)
    # Unpaused, the DAG runs today's latest window too: its stream has no data for it, so the run waits (its one
    # task deferred on the triggerer), shown with a link to that task.
    waiting = frame.locator('#windows tr[data-state="running"]', has_text="waiting for its inputs to land").first
    waiting.wait_for()
    assert re.search(r"/dags/ui_tollgates/runs/scheduled__[^/]+/tasks/evaluate_window$",
                     waiting.get_by_role("link", name="log").get_attribute("href"))

    # The windows, their figures and links, the charts and the latest results.
    row = frame.locator(f'#windows tr[data-window-end="{WINDOWS[-1]}"]')
    expected = expected_passages(ui, WINDOWS[-1])
    assert row.locator("td.rows").inner_text() == str(len(expected))
    assert re.search(r"/dags/ui_tollgates/runs/manual__csparql__2010-03-22T08%3A50%3A00Z__\w+/tasks/evaluate_window$",
                     row.get_by_role("link", name="log").get_attribute("href"))
    assert frame.locator("#chart-duration circle").count() == 3
    assert frame.locator("#chart-rows rect").count() == 3
    shown = {}
    for cells in frame.locator("#results tbody tr").all():
        gate, passages = cells.locator("td").all_inner_texts()
        shown[gate] = int(passages)
    assert shown == {f"<{gate}>": count for gate, count in expected.items()}
    assert frame.locator("#lags td.num.lag").inner_text()  # lag behind the stream's watermark
    assert "<http://streams.org/milantollgates.trdf>" in frame.locator("#query-text-shown").inner_text()
    page.screenshot(path=screenshots / "05-monitor-in-airflow.png", full_page=True)

    # The run's log opens in Airflow's own task page.
    row.get_by_role("link", name="log").click()
    page.wait_for_url(re.compile(r".*/dags/ui_tollgates/runs/manual__csparql__2010-03-22T08(%3A|:)50.*/tasks/evaluate_window"))
    page.get_by_text("row(s) written").first.wait_for()
    page.screenshot(path=screenshots / "06-run-log.png")

    # The DAG's "Query" tab shows the same monitor.
    page.goto(f"{ui.url}/dags/{NAME}")
    page.locator("a[href$='/plugin/csparql-query']", has_text="Query").click()
    tab = page.frame_locator("iframe[title='Query']")
    tab.locator(f'#windows tr[data-window-end="{WINDOWS[0]}"][data-state="complete"]').wait_for()
    page.screenshot(path=screenshots / "07-dag-query-tab.png")

    # The streams page, and the monitor page on its own (the screenshot the README shows).
    page.goto(f"{ui.url}/csparql/streams")
    stream = page.locator(f'section.stream[data-iri="{MILAN}"]')
    assert stream.locator("dd.triples").inner_text() == "720"
    assert stream.locator("svg.chart rect").count() == 1
    page.screenshot(path=screenshots / "08-streams.png", full_page=True)
    page.goto(f"{ui.url}/csparql/dags/ingest_milan")
    page.get_by_role("heading", name="Not a C-SPARQL query").wait_for()
    page.screenshot(path=screenshots / "09-not-a-query-tab.png")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{ui.url}/csparql/queries/{NAME}")
    page.locator("#results").wait_for()
    page.screenshot(path=screenshots / "monitor.png", full_page=True)
    assert page.title() == f"{NAME} · csparql"
    page.close()
    assert elsewhere == []
