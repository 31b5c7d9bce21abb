"""The register page's check of a query text: the registry's own rules, problems with their place, and the
optimized plan and next windows of a valid query — without Airflow, Spark or a browser."""

from __future__ import annotations

import pytest

from csparql.deploy.preview import MAX_TEXT, preview
from csparql.deploy.registration import register_text
from csparql.core.windows import parse_instant

MINUTE = 60_000_000
T0 = parse_instant("2010-03-22T08:00:00Z")
STREAM = "http://streams.org/milantollgates.trdf"
QUERY = f"""REGISTER QUERY Tollgates COMPUTED EVERY 5m AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 10m STEP 5m]
WHERE {{ ?gate t:registers ?car . }}
GROUP BY ?gate
"""
PRODUCER = """REGISTER STREAM Busy AS
CONSTRUCT { ?s <http://example.org/busy> true }
FROM STREAM <http://example.org/in> [RANGE 10m STEP 5m]
WHERE { ?s <http://example.org/p> ?o }
"""


def test_a_valid_query_previews_its_plan_and_next_windows(settings):
    outcome = preview(QUERY, settings, now=T0 + 7 * MINUTE, count=3)
    assert outcome.ok and outcome.name == "Tollgates" and outcome.form == "select"
    assert outcome.schedule == "every 5m" and outcome.streams == ((STREAM, "RANGE 10m STEP 5m"),)
    assert "(group" in outcome.optimized and f"<{STREAM}>" in outcome.optimized
    # evaluations every 5 minutes from the epoch; each waits for the watermark to pass its end plus 2m
    assert [(r.at, r.window_start, r.window_end, r.streams) for r in outcome.next_runs] == [
        (T0 + m * MINUTE, T0 + (m - 10) * MINUTE, T0 + m * MINUTE, {STREAM: T0 + (m + 2) * MINUTE})
        for m in (10, 15, 20)]
    assert not list(settings.registry.iterdir())  # nothing written


def test_problems_carry_their_line_and_column(settings):
    broken = QUERY.replace("?gate t:registers ?car .", "?gate t:registers .")
    outcome = preview(broken, settings)
    problem, = outcome.problems
    assert (problem.line, problem.column) == (5, 27) and "unexpected '.'" in problem.message
    assert "5 | WHERE { ?gate t:registers . }" in problem.rendered
    semantic = preview(QUERY.replace("[RANGE 10m STEP 5m]", "[RANGE 5m STEP 10m]"), settings)
    assert semantic.problems[0].line == 4 and "STEP" in semantic.problems[0].message


@pytest.mark.parametrize("name", ["../x", "a/b", "x.y", "1abc", "with space", ""])
def test_names_that_are_not_dag_ids_are_refused(settings, name):
    text = QUERY.replace("REGISTER QUERY Tollgates COMPUTED EVERY 5m AS\n", "") if name == "" else QUERY
    outcome = preview(text, settings, name=name or None)
    assert not outcome.ok
    if name:
        assert f"'{name}' cannot name a registered query" in outcome.problems[0].message
    else:
        assert "give the query a name" in outcome.problems[0].message


def test_registry_rules_are_checked_too(settings):
    register_text(PRODUCER, settings)
    second = preview(PRODUCER, settings, name="Copy")
    assert "already produced by Busy.rq" in second.problems[0].message
    loop = PRODUCER.replace("Busy", "Loop").replace("<http://example.org/in>", "<urn:csparql:stream:Loop>")
    assert "reads the stream it produces" in preview(loop, settings).problems[0].message


def test_empty_and_oversized_texts_get_a_message(settings):
    assert "empty" in preview("  \n", settings).problems[0].message
    assert "at most" in preview("#" * (MAX_TEXT + 1), settings).problems[0].message


def test_a_one_shot_query_has_no_schedule(settings):
    outcome = preview("SELECT * WHERE { ?s ?p ?o }", settings, name="adhoc")
    assert outcome.ok and outcome.next_runs == () and outcome.schedule is None


GROUPS = "WHERE " + "{ " * 500 + "?gate t:registers ?car ." + " }" * 500
OPTIONALS = "?gate t:registers ?car . " + "OPTIONAL { ?gate t:registers ?car . " * 500 + "}" * 500


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        (QUERY.replace("COMPUTED EVERY 5m", "COMPUTED EVERY 99999999999999999999d"), 1, 41,
         "COMPUTED EVERY is longer than 36525d (100 years), the longest duration csparql accepts"),
        (QUERY.replace("[RANGE 10m STEP 5m]", "[RANGE 99999999999999999999d STEP 1m]"), 4, 61,
         "the window RANGE is longer than 36525d (100 years), the longest duration csparql accepts"),
        # the SELECT expression is a level above WHERE, whose group is the next: the 64th '{' is too deep
        (QUERY.replace("WHERE { ?gate t:registers ?car . }", GROUPS), 5, len("WHERE ") + 2 * 63 + 1,
         "the query nests more than 64 levels deep here"),
        (QUERY.replace("?gate t:registers ?car .", OPTIONALS), 5, None,
         "the query nests more than 64 levels deep here"),
    ],
    ids=["computed-every", "range", "500-groups", "500-optionals"],
)
def test_limits_are_problems_at_their_place_not_server_errors(settings, text, line, column, message):
    problem, = preview(text, settings).problems
    assert problem.line == line and problem.column == (column or problem.column) and problem.message.startswith(message)
    assert len(problem.rendered) < 1000


def test_a_report_on_many_problems_lists_the_first_and_counts_the_rest(settings):
    clauses = " ".join(f"AGGREGATE {{ (?n{i}, SUM, {{?gate}}) }}" for i in range(25))
    outcome = preview(QUERY.replace("GROUP BY ?gate", clauses), settings)
    assert len(outcome.problems) == 21 and outcome.problems[-1].message == "… and 5 more problems"


def test_a_register_request_compiles_its_text_once_for_the_preview_the_checks_and_the_registration(
        settings, monkeypatch):
    """The register page previews the text, then registers it: one compilation serves both (and every
    deployment built from it), and a browser's line endings are the same text."""
    import csparql.core.frontend

    compiled = []
    compile_query = csparql.core.frontend.compile_query
    monkeypatch.setattr(csparql.core.frontend, "compile_query", lambda *args: compiled.append(args) or compile_query(*args))
    text = QUERY.replace("Tollgates", "CompiledOnce").replace("\n", "\r\n")
    outcome = preview(text, settings)
    assert outcome.ok and outcome.name == "CompiledOnce"
    register_text(text, settings, name=outcome.name)
    assert len(compiled) == 1
    # a text that does not compile is compiled again each time, its errors naming where it came from
    with pytest.raises(Exception, match="broken.rq"):
        register_text(text.replace("SELECT", "SELEKT"), settings, name="Broken", source_name="broken.rq")
    assert len(compiled) == 2


def test_a_register_request_checks_the_text_without_optimizing_or_printing_plans_it_does_not_show(
        settings, monkeypatch):
    """The check a register or save request runs (``plans=False``) finds what the full preview finds — the
    name, the schedule, every problem — and neither optimizes the plan nor prints it."""
    import csparql.deploy.preview as preview_module

    optimized = []
    optimize = preview_module.optimize
    monkeypatch.setattr(preview_module, "optimize", lambda *args: optimized.append(args) or optimize(*args))
    checked = preview(QUERY, settings, plans=False)
    assert checked.ok and (checked.name, checked.form, checked.schedule) == ("Tollgates", "select", "every 5m")
    assert (checked.algebra, checked.optimized, checked.next_runs) == (None, None, ()) and not optimized
    full = preview(QUERY, settings, now=T0, count=2)
    assert full.optimized and len(full.next_runs) == 2 and len(optimized) == 1
    for text in (QUERY.replace("?gate t:registers ?car .", "?gate t:registers ."), PRODUCER.replace(
            "<http://example.org/in>", "<urn:csparql:stream:Busy>")):
        assert preview(text, settings, plans=False).problems == preview(text, settings).problems != ()
    assert len(optimized) == 1  # a text with problems is never optimized
