"""What ``csparql --help`` and every command's ``--help`` say is in a user's words: no reference to the
project's design notes, issues or paper sections, which a user has not read."""

from __future__ import annotations

import argparse
import re

from csparql.cli import build_parser

PRIVATE_REFERENCES = re.compile(r"\bdecisions? \d|\bissues? #?\d|§")


def every_help(parser: argparse.ArgumentParser, name: str = "csparql") -> dict[str, str]:
    """The ``--help`` text of ``parser`` and of each of its commands, nested ones included, by command line."""
    texts = {name: parser.format_help()}
    for action in parser._actions:  # argparse has no public way to list a parser's commands
        if isinstance(action, argparse._SubParsersAction):
            for command, subparser in action.choices.items():
                texts.update(every_help(subparser, f"{name} {command}"))
    return texts


def test_no_help_text_refers_to_design_notes_issues_or_paper_sections():
    texts = every_help(build_parser())
    assert len(texts) > 20  # every command was reached
    referring = {command: PRIVATE_REFERENCES.findall(text) for command, text in texts.items()
                 if PRIVATE_REFERENCES.search(text)}
    assert referring == {}


def test_a_refused_query_s_message_refers_to_no_paper_section(tmp_path, capsys):
    from csparql.cli import main

    query = tmp_path / "stream.rq"
    query.write_text("REGISTER STREAM S AS\nSELECT ?s\nFROM STREAM <http://ex.org/s> [RANGE 5m STEP 5m]\n"
                     "WHERE { ?s ?p ?o }\n", encoding="utf-8")
    assert main(["check", str(query)]) == 1
    message = capsys.readouterr().err
    assert "only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in message
    assert not PRIVATE_REFERENCES.search(message) and "000" not in message
