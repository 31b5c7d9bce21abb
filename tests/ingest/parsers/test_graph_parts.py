"""A large TriG or N-Quads file read in parts at once (``csparql.ingest.parsers.graph_parts``) gives exactly the columns
the file read whole gives, whatever the cuts fall on: prefixes redefined and a base changed between parts,
blank node labels shared by parts, statements written over several lines, a directive-looking line inside a
long string; and a file that is not valid fails with the whole file's error and line. The parts run as real
child processes."""

from __future__ import annotations

import random

import pytest

from csparql.ingest.parsers import graph_parts
from csparql.ingest.parsers.graphs import parse_quads, quad_columns

EX = "http://ex.org/"
PROV = "http://www.w3.org/ns/prov#generatedAtTime"


def one_line_events(count: int, seed: int = 5) -> str:
    """Events one per line, with prefixes redefined and the base changed midway, blank nodes shared across the
    file, a default-graph timestamp per event."""
    chosen = random.Random(seed)
    lines = [f"@prefix ex: <{EX}> .", "@prefix prov: <http://www.w3.org/ns/prov#> .", f"@base <{EX}base/> ."]
    for number in range(count):
        if number == count // 3:
            lines += [f"@prefix ex: <{EX}second/> .", f"PREFIX extra: <{EX}extra/>"]
        if number == 2 * count // 3:
            lines.append(f"@base <{EX}later/> .")
        car = f"_:car{chosen.randrange(20)}" if chosen.random() < 0.3 else f"ex:car{number}"
        value = chosen.choice(['"red"', '"grey"@en', "42", '"a \\"quoted\\" one"', "<relative>"])
        lines.append(f"ex:event{number} {{ {car} ex:colour {value} . ex:gate{number % 7} ex:registers {car} . }}")
        lines.append(f'ex:event{number} prov:generatedAtTime "2010-03-22T10:{number % 60:02d}:00Z"^^'
                     "<http://www.w3.org/2001/XMLSchema#dateTime> .")
    return "\n".join(lines) + "\n"


def pretty_events(count: int) -> str:
    """Events written over several lines each (indented blocks, a long string spanning lines whose content
    looks like directives and statements)."""
    out = [f"@prefix ex: <{EX}> ."]
    for number in range(count):
        out.append(f"ex:event{number} {{\n    ex:car{number} ex:colour \"red\" ;\n        ex:note \"\"\"line one\n"
                   f"@prefix ex: <http://evil.org/> .\nex:a ex:b ex:c .\n\"\"\" .\n}}\n"
                   f"ex:event{number} <{PROV}> \"2010-03-22T10:00:00Z\" .")
    return "\n".join(out) + "\n"


def whole(path, format):
    return quad_columns(parse_quads(path, format))


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_a_file_read_in_parts_gives_the_columns_of_the_file_read_whole(tmp_path, parts):
    path = tmp_path / "events.trig"
    path.write_text(one_line_events(3000), encoding="utf-8")
    in_parts = graph_parts._read_in_parts(path, "trig", parts)
    assert in_parts is not None, "the cuts of a file of one statement per line are trusted"
    assert in_parts.equals(whole(path, "trig"))
    assert graph_parts.read_quads(path, "trig", parts=parts, min_bytes=0).equals(whole(path, "trig"))


def test_standard_n_quads_read_in_parts_give_the_same_columns(tmp_path):
    trig = tmp_path / "events.trig"
    trig.write_text(one_line_events(2000), encoding="utf-8")
    import pyoxigraph as ox

    path = tmp_path / "events.nq"
    path.write_bytes(ox.serialize(ox.parse(path=str(trig), format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))
    in_parts = graph_parts._read_in_parts(path, "nquads", 2)
    assert in_parts is not None and in_parts.equals(whole(path, "nquads"))


@pytest.mark.parametrize("parts", [2, 3])
def test_cuts_inside_statements_or_strings_are_caught_and_the_file_is_read_whole(tmp_path, parts):
    path = tmp_path / "pretty.trig"
    path.write_text(pretty_events(400), encoding="utf-8")
    expected = whole(path, "trig")
    assert expected.num_rows == 1200
    assert graph_parts.read_quads(path, "trig", parts=parts, min_bytes=0).equals(expected)
    assert "http://evil.org/" not in str(expected.column("s_term").to_pylist())


def test_a_file_that_is_not_valid_fails_with_the_whole_files_error(tmp_path):
    text = one_line_events(2000).splitlines()
    text[3000] = text[3000].replace(" . }", " }}")  # a syntax error late in the file
    path = tmp_path / "broken.trig"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    with pytest.raises(SyntaxError) as whole_error:
        whole(path, "trig")
    with pytest.raises(SyntaxError) as parts_error:
        graph_parts.read_quads(path, "trig", parts=2, min_bytes=0)
    assert (parts_error.value.lineno, str(parts_error.value)) == (whole_error.value.lineno, str(whole_error.value))


def test_directive_lines_are_found_wherever_they_start_a_line():
    data = (b"@prefix a: <http://a/> .\nPREFIX b: <http://b/>\n<x> <y> <z> .\n  @prefix c: <http://c/> .\n"
            b"base <http://base/>\n<a> <base> <c> .\n@base <http://d/> .\nprefixes <a> <b> .\nxbase <http://no/>\n")
    assert [line for _, line in graph_parts._directives(data, len(data))] == [
        b"@prefix a: <http://a/> .\n", b"PREFIX b: <http://b/>\n", b"base <http://base/>\n",
        b"@base <http://d/> .\n"]
    assert [line for _, line in graph_parts._directives(data, 30)] == [b"@prefix a: <http://a/> .\n"]


def test_without_a_child_process_the_file_is_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "events.trig"
    path.write_text(one_line_events(1000), encoding="utf-8")
    monkeypatch.setattr(graph_parts.sys, "executable", str(tmp_path / "no-python-here"))
    assert graph_parts._read_in_parts(path, "trig", 2) is None
    assert graph_parts.read_quads(path, "trig", parts=2, min_bytes=0).equals(whole(path, "trig"))
