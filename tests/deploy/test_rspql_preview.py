"""The register page's check and the registry read RSP-QL through the same front end as C-SPARQL: a valid RSP-QL
query previews its name, schedule and windows and can be registered; a broken one gets its problems with line
and column."""

from __future__ import annotations

from csparql.deploy.preview import preview
from csparql.deploy.registration import register_text
from csparql.core.windows import parse_instant

MINUTE = 60_000_000
T0 = parse_instant("2010-03-22T08:00:00Z")
STREAM = "http://streams.org/milantollgates.trdf"
QUERY = f"""PREFIX t: <http://linkedurbandata.org/traffic#>
REGISTER RSTREAM <http://example.org/Tollgates> AS
SELECT ?gate (COUNT(?car) AS ?cars)
FROM NAMED WINDOW <w> ON <{STREAM}> [RANGE PT10M STEP PT5M]
WHERE {{ WINDOW <w> {{ ?gate t:registers ?car . }} }}
GROUP BY ?gate
"""


def test_an_rspql_query_previews_as_its_csparql_equivalent(settings):
    outcome = preview(QUERY, settings, now=T0 + 7 * MINUTE, count=2)
    assert outcome.ok and outcome.name == "Tollgates" and outcome.form == "select"
    assert outcome.schedule == "every 5m" and outcome.streams == ((STREAM, "RANGE 10m STEP 5m"),)
    assert [(r.window_start, r.window_end) for r in outcome.next_runs] == [
        (T0, T0 + 10 * MINUTE), (T0 + 5 * MINUTE, T0 + 15 * MINUTE)]


def test_rspql_problems_carry_their_line_and_column(settings):
    outcome = preview(QUERY.replace("WINDOW <w> {", "WINDOW <v> {"), settings)
    problem, = outcome.problems
    assert (problem.line, problem.column) == (5, 16) and "the window <v> is not declared" in problem.message


def test_an_rspql_query_is_registered(settings):
    target = register_text(QUERY, settings)
    assert target.stem == "Tollgates" and target.read_text(encoding="utf-8") == QUERY
