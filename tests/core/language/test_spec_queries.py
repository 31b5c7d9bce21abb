"""Every query the specification prints gets the outcome its header states, through ``csparql check``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from csparql.cli import main
from support import REFUSED_SPEC_QUERIES, ROOT, SPEC_QUERIES, expected_outcome, spec_query_files

SPEC_FILES = spec_query_files()


def test_the_specification_folder_is_all_here():
    assert len(SPEC_FILES) == 17


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_csparql_check_gives_the_expected_outcome(path, capsys):
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    if expected_outcome(path) == "ok":
        assert code == 0, err
        assert out.strip() and not err
    else:
        assert code == 1
        assert "Traceback" not in err
        assert f"{path}:" in err and "^" in err


def test_register_stream_on_select_names_the_rule_the_line_and_the_remedy(capsys):
    path = next(p for p in SPEC_FILES if p.stem.startswith("10-"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "only CONSTRUCT and DESCRIBE queries can be registered as STREAM" in err
    assert f"{path}:7:1:" in err
    assert "REGISTER QUERY AllCarsTurningFromPalmIntoOak" in err


def test_check_of_the_whole_folder_exits_1_and_counts(capsys):
    assert main(["check", "--quiet", *map(str, SPEC_FILES)]) == 1
    assert "16 of 17 valid" in capsys.readouterr().err


def test_the_refused_examples_are_kept_apart_so_that_checking_the_examples_folder_exits_0(capsys):
    # The README's first command, `csparql check examples/queries/*.rq`, must not trip on the queries the
    # specification prints as errors: those live in examples/queries/refused/, the valid ones beside it.
    assert {expected_outcome(p) for p in SPEC_QUERIES.glob("*.rq")} == {"ok"}
    assert {expected_outcome(p) for p in REFUSED_SPEC_QUERIES.glob("*.rq")} == {"error"}
    assert main(["check", "--quiet", *map(str, sorted(SPEC_QUERIES.glob("*.rq")))]) == 0
    assert "16 of 16 valid" in capsys.readouterr().err


def test_the_console_script_reads_standard_input():
    script = ROOT / ".venv" / "bin" / "csparql"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "csparql.cli"]
    ok = subprocess.run([*command, "check", "-"], input="SELECT * WHERE { ?s ?p ?o }", capture_output=True, text=True)
    assert ok.returncode == 0 and "SELECT *" in ok.stdout
    bad = subprocess.run([*command, "check", "-"], input="SELECT * WHERE { ?s ?p }", capture_output=True, text=True)
    assert bad.returncode == 1
    assert "<stdin>:1:24: error:" in bad.stderr and "Traceback" not in bad.stderr


def test_every_example_registers_under_a_name_of_its_own():
    # Examples that share a REGISTER name would write into one result table: ``csparql demo`` and the stack
    # evaluate them all in one warehouse.
    from collections import Counter

    from csparql.core.frontend import compile_query

    for folder in (SPEC_QUERIES, ROOT / "examples" / "rspql" / "queries"):
        registered = [compile_query(p.read_text(encoding="utf-8"), p.name).registration for p in folder.glob("*.rq")]
        names = Counter(r.name for r in registered if r is not None)
        assert names and not [name for name, count in names.items() if count > 1], folder
