"""RSP-QL through the command line: ``csparql check`` of many malformed queries (one-screen errors, never a
traceback), ``check`` and ``translate`` of valid ones, and ``--dialect``."""

from __future__ import annotations

import re

import pytest

from csparql.cli import main
from csparql.core.frontend import compile_query
from csparql.core.language.dialect import detect_dialect
from support import FIXTURES, read_blocks

MALFORMED = read_blocks(FIXTURES / "rspql" / "malformed.rq")
VALID = {block.name: block.text for block in read_blocks(FIXTURES / "rspql" / "queries.rq")}
SCREEN_LINES = 24


def test_the_malformed_fixture_is_large():
    assert len(MALFORMED) >= 60
    assert len((FIXTURES / "rspql" / "malformed.rq").read_text(encoding="utf-8").splitlines()) >= 500
    # all but the SPARQL Update one are told to be RSP-QL from their text
    assert [b.name for b in MALFORMED if detect_dialect(b.text) != "rspql"] == ["update"]


@pytest.mark.parametrize("block", MALFORMED, ids=[block.name for block in MALFORMED])
def test_each_malformed_query_gets_a_one_screen_error(block, tmp_path, capsys):
    path = tmp_path / f"{block.name}.rq"
    path.write_text(block.text + "\n", encoding="utf-8")
    assert main(["check", "--dialect", "rspql", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    error = captured.err
    assert "Traceback" not in error and "internal error" not in error
    assert len(error.splitlines()) <= SCREEN_LINES, error
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: error: ", error, flags=re.M), error
    assert re.search(r"^\s+\|\s*\^+", error, flags=re.M), error  # the caret under the place


def test_all_malformed_queries_in_one_check(tmp_path, capsys):
    paths = []
    for block in MALFORMED:
        paths.append(tmp_path / f"{block.name}.rq")
        paths[-1].write_text(block.text + "\n", encoding="utf-8")
    assert main(["check", *map(str, paths)]) == 1
    error = capsys.readouterr().err
    assert f"0 of {len(MALFORMED)} valid" in error and "Traceback" not in error


def test_check_prints_a_valid_rspql_query_as_rspql(tmp_path, capsys):
    path = tmp_path / "q.rq"
    path.write_text(VALID["rspjs-milliseconds"], encoding="utf-8")
    assert main(["check", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "REGISTER RSTREAM <output> AS" in printed and "ON STREAM" in printed and "WINDOW :w1 {" in printed
    assert compile_query(printed) == compile_query(VALID["rspjs-milliseconds"])


def test_a_forced_dialect_reads_the_text_in_it(tmp_path, capsys):
    path = tmp_path / "q.rq"
    path.write_text(VALID["rsp4j-count-per-subject"], encoding="utf-8")
    assert main(["check", "--dialect", "csparql", str(path)]) == 1
    assert "unexpected 'REGISTER'" in capsys.readouterr().err
    other = tmp_path / "c.rq"
    other.write_text(VALID["rsp4j-count-per-subject.csparql"], encoding="utf-8")
    assert main(["check", "--dialect", "rspql", str(other)]) == 1
    assert "REGISTER QUERY <name> is C-SPARQL" in capsys.readouterr().err


def test_translate_both_ways(tmp_path, capsys):
    rspql = tmp_path / "r.rq"
    rspql.write_text(VALID["istream"], encoding="utf-8")
    assert main(["translate", "--to", "csparql", str(rspql)]) == 0
    captured = capsys.readouterr()
    assert "REGISTER QUERY arrivals AS" in captured.out and "SELECT ISTREAM ?s ?o" in captured.out
    assert "note: the output IRI <http://example.org/arrivals> becomes the query name 'arrivals'" in captured.err
    csparql = tmp_path / "c.rq"
    csparql.write_text(captured.out, encoding="utf-8")
    assert main(["translate", "--to", "rspql", str(csparql)]) == 0
    back = capsys.readouterr().out
    assert "REGISTER ISTREAM <arrivals> AS" in back
    assert compile_query(back) == compile_query(VALID["istream"])


def test_translate_says_what_cannot_be_expressed(capsys):
    example = FIXTURES.parent.parent / "examples" / "queries" / "09-timestamp-function.rq"
    assert main(["translate", "--to", "rspql", str(example)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "RSP-QL cannot express this C-SPARQL query" in captured.err
    assert "timestamp() cannot be expressed in RSP-QL" in captured.err and "Traceback" not in captured.err


SEVERAL_WINDOWS = {block.name: block.text for block in read_blocks(FIXTURES / "rspql" / "several_windows.rq")}


def test_translate_to_csparql_refuses_several_windows_over_one_stream(tmp_path, capsys):
    path = tmp_path / "longshort.rq"
    path.write_text(SEVERAL_WINDOWS["long-and-short-counts"], encoding="utf-8")
    assert main(["translate", "--to", "csparql", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert "C-SPARQL cannot express this RSP-QL query" in captured.err
    assert f"{path}:5:" in captured.err and "both read the stream <http://streams.example.org/s1>" in captured.err
    assert main(["check", str(path)]) == 0  # in its own dialect it is printed back
    assert "WINDOW ex:short {" in capsys.readouterr().out


def test_explain_shows_each_window_as_its_own_graph(tmp_path, capsys):
    path = tmp_path / "pergraph.rq"
    path.write_text(SEVERAL_WINDOWS["graph-variable"], encoding="utf-8")
    assert main(["explain", str(path), "--warehouse", str(tmp_path / "warehouse")]) == 0
    out = capsys.readouterr().out
    assert "(window <http://streams.example.org/s1> (range 10m) (step 5m) (graph ex:w10))" in out
    assert "(window <http://streams.example.org/s1> (range 3m) (step 1m) (graph ex:w3))" in out
    assert "(window <http://streams.example.org/s3> (range 5m) (step 1m))" in out
    assert "# panes" in out
