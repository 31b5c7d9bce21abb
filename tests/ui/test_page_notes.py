"""What the pages say without a running Airflow: the note of a query whose windows wait for data that is not
coming (and the window it offers instead), and the register editor starting empty."""

from __future__ import annotations

import re
import time

from csparql.deploy.monitoring import stream_lags
from csparql.deploy.plan import deployment_of_text
from csparql.deploy.settings import Settings
from csparql.web.pages.editor import EXAMPLE, register_editor
from csparql.web.views import templates
from csparql.web.waiting import waiting_note
from csparql.core.windows import parse_instant
from support import SPEC_QUERIES

TOLLGATES = "http://streams.org/citytollgates.trdf"
MINUTE = 60_000_000


def deployment(tmp_path):
    settings = Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                          "CSPARQL_REGISTRY": str(tmp_path / "dags" / "queries")})
    return deployment_of_text((SPEC_QUERIES / "04-cars-per-district.rq").read_text(), "PerDistrict", settings)


def test_windows_waiting_for_data_that_is_not_coming_are_said_so_with_the_latest_window_with_data(tmp_path):
    query = deployment(tmp_path)
    now = time.time_ns() // 1000
    data_end = parse_instant("2010-03-22T11:00:00Z")
    note = waiting_note(query, stream_lags(query, {TOLLGATES: data_end + 2 * MINUTE}, []), now)
    assert note is not None
    assert note.text.startswith("Its windows wait for data that is not coming: "
                                f"<{TOLLGATES}> has data up to 2010-03-22T11:02:00Z, ")
    assert "nothing later has landed" in note.text and "the latest window with data ends 2010-03-22T11:00:00Z" in note.text
    assert note.window_end == data_end  # every 5 minutes; the stream allows 2 minutes of lateness

    # a stream that keeps up (a minute behind the clock): nothing to say
    assert waiting_note(query, stream_lags(query, {TOLLGATES: now - MINUTE}, []), now) is None
    # a stream with no data yet: said so, and no window offered
    empty = waiting_note(query, stream_lags(query, {}, []), now)
    assert empty.window_end is None and f"nothing has landed in <{TOLLGATES}> yet" in empty.text


def test_the_register_editor_starts_empty_and_offers_an_example():
    html = templates().get_template("editor.html").render(base="/csparql", **register_editor(True))
    textarea = re.search(r"<textarea[^>]*>(.*?)</textarea>", html, re.S)
    assert textarea.group(1) == ""  # a paste replaces nothing
    assert 'placeholder="Paste or type a query here, or press Insert an example"' in textarea.group(0)
    button = re.search(r'<button type="button" id="insert-example" data-example="([^"]*)"', html)
    assert button and "REGISTER QUERY CarsPerTollgate" in button.group(1) and EXAMPLE.startswith("REGISTER QUERY")
