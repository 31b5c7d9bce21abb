"""The README's and the getting-started guide's commands work as written in a fresh clone: every
``.venv/bin/csparql`` command of the README's *Your first query*, and of the guide's *Writing queries*, *Streams
in, results out* and *Registering queries with Airflow* sections, is run in order in a fresh folder holding a
copy of ``examples/`` (with ``$CSPARQL_WAREHOUSE`` and ``$CSPARQL_REGISTRY`` in it), and exits 0 printing what
the page says it prints. The commands run in this process (the suite's Spark session serves those that run
Spark), each parsed as the shell would; the guide's first one also runs in a real shell.
"""

from __future__ import annotations

import csv
import glob
import io
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from csparql.cli import main
from support import ROOT

README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "getting-started.md"
QUICK_START_SECTIONS = ("Writing queries", "Streams in, results out", "Registering queries with Airflow")
CSPARQL = ".venv/bin/csparql"


def readme_sections(page=README) -> dict[str, str]:
    """A page's ``## `` sections by title (the README's by default)."""
    parts = re.split(r"^## (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def shell_commands(section: str) -> list[str]:
    """The command lines of a section's ``bash`` blocks."""
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.M | re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def quick_start_commands(page=GUIDE, titles=QUICK_START_SECTIONS) -> list[list[str]]:
    """Each ``csparql`` command of a page's sections (the guide's quick start by default), split as the shell
    splits it (comments dropped)."""
    sections = readme_sections(page)
    commands = []
    for title in titles:
        for line in shell_commands(sections[title]):
            if line.startswith(CSPARQL + " "):  # not the airflow commands
                commands.append(shlex.split(line, comments=True))
    return commands


@pytest.fixture
def fresh_clone(tmp_path, monkeypatch):
    """A fresh folder with the repository's examples, its own warehouse and registry, as the working folder;
    ``.venv/bin/csparql`` in it is this environment's csparql."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "csparql").symlink_to(shutil.which("csparql", path=str(sys.executable.rpartition("/")[0])))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "delta_tables"))
    monkeypatch.setenv("CSPARQL_REGISTRY", str(tmp_path / "dags" / "queries"))
    monkeypatch.delenv("CSPARQL_LANDING", raising=False)
    return tmp_path


def run_as_written(words: list[str], capsys) -> tuple[str, str]:
    """Run one README command (its globs expanded as the shell would); its standard output and error."""
    arguments = [match for word in words[1:] for match in (sorted(glob.glob(word)) if "*" in word else [word])]
    capsys.readouterr()
    code = main(arguments)
    out, err = capsys.readouterr()
    assert code == 0, f"{shlex.join(words)} exited {code}:\n{err}"
    assert "Traceback" not in err
    return out, err


def test_the_first_command_exits_0_in_a_shell(fresh_clone):
    first = " ".join(quick_start_commands()[0])
    assert first == ".venv/bin/csparql check examples/queries/*.rq"
    done = subprocess.run(["bash", "-c", first], capture_output=True, text=True, cwd=fresh_clone)
    assert done.returncode == 0, done.stderr
    assert "16 of 16 valid" in done.stderr


def test_the_quick_start_runs_as_written_in_a_fresh_clone(spark, fresh_clone, capsys):
    commands = quick_start_commands()
    names = [words[1] for words in commands]
    for command in ("check", "explain", "translate", "samples", "ingest", "load-static", "streams", "run", "replay",
                    "results", "sql", "register"):
        assert command in names, f"the guide's quick start has no `csparql {command}`"
    assert any(words[1] == "register" and "--warehouse" in words for words in commands)
    printed = []
    for words in commands:
        out, err = run_as_written(words, capsys)
        printed.append((words, out, err))

    def output(command: str, *having: str) -> tuple[str, str]:
        return next((out, err) for words, out, err in printed if words[1] == command and all(h in words for h in having))

    out, err = output("check", "examples/queries/*.rq")
    assert "16 of 16 valid" in err and "REGISTER QUERY CarsEnteringCityCenterPerDistrict" in out
    out, _ = output("explain")
    assert "# algebra" in out and "# optimized" in out
    out, _ = output("samples")
    assert "samples/citytollgates.tnq" in out and "samples/city.ttl" in out
    out, _ = output("ingest")
    assert re.search(r"^\d+ triples landed in <http://streams.org/citytollgates.trdf> \(1 file\), 0 rejected$", out, re.M)
    out, _ = output("load-static")
    assert re.search(r"^\d+ triples landed in the default graph \(1 file\), 0 rejected$", out, re.M)
    out, _ = output("streams")
    landing = fresh_clone / "delta_tables" / "landing"
    assert re.search(rf"^<http://streams.org/citytollgates.trdf>\t\S+\t{re.escape(str(landing))}/\S+\t2010-03-22T1",
                     out, re.M)
    out, err = output("run")
    assert out.startswith("?district\t?passages\n") and len(out.splitlines()) > 1
    assert "window (2010-03-22T08:30:00Z, 2010-03-22T09:00:00Z]" in err
    out, _ = output("replay")
    assert len(out.splitlines()) == 7  # a line a window: 08:30, 08:35, …, 09:00
    out, _ = output("results", "--format")
    table = list(csv.reader(io.StringIO(out)))  # one CSV a reader loads whole
    assert table[0] == ["window_start", "window_end", "district", "passages"]
    assert len(table) > 7 and {row[1] for row in table[1:]} >= {"2010-03-22T08:30:00Z", "2010-03-22T09:00:00Z"}
    out, _ = output("sql", "SELECT window_end, district, passages FROM carsenteringcitycenterperdistrict ORDER BY window_end")
    assert out.splitlines()[0].split() == ["window_end", "district", "passages"]
    out, _ = output("register")
    assert out.startswith("registered CarsEnteringCityCenterPerDistrict: ")
    assert "starts paused" in out and "airflow dags unpause CarsEnteringCityCenterPerDistrict" in out
    assert (fresh_clone / "dags" / "queries" / "CarsEnteringCityCenterPerDistrict.rq").exists()


def test_the_backfill_command_is_shown_with_the_stacks_airflow_home():
    for section in (readme_sections()["Your first query"], readme_sections(GUIDE)["Registering queries with Airflow"]):
        lines = shell_commands(section)
        backfill = next(i for i, line in enumerate(lines) if line.startswith("airflow backfill create"))
        assert any("AIRFLOW_HOME=" in line and "source .airflow/env.sh" in line for line in lines[:backfill])


def test_the_readme_s_first_query_runs_as_written_and_prints_what_the_readme_says(spark, fresh_clone, capsys):
    section = readme_sections()["Your first query"]
    commands = quick_start_commands(README, ("Your first query",))
    assert [words[1] for words in commands] == ["samples", "ingest", "load-static", "check", "run", "sql", "register"]
    printed = {words[1]: run_as_written(words, capsys) for words in commands}
    told = re.search(r"`ingest` says `([^`]+)`", section).group(1).replace("\n", " ")
    assert " ".join(told.split()) in printed["ingest"][0]
    told = re.search(r"the Brera district had (\d+) passages, Baggio (\d+)", section).groups()
    out, err = printed["run"]
    assert len(out.splitlines()) == 1 + 5, out
    for district, passages in zip(("Brera", "Baggio"), told):
        assert f"<http://linkedurbandata.org/city#IT-MI-{district}>\t{passages}" in out.splitlines(), out
    assert "window (2010-03-22T08:30:00Z, 2010-03-22T09:00:00Z]" in err
    rows = printed["sql"][0].splitlines()
    assert rows[0].split() == ["window_end", "district", "passages"] and "IT-MI-Brera" in rows[2]
    assert printed["register"][0].startswith("registered CarsEnteringCityCenterPerDistrict: ")


def test_the_guide_names_the_tables_run_sh_creates_and_where_demo_writes():
    from csparql.stack.embedded import EXAMPLES, example_name

    install = readme_sections(GUIDE)["Install and run"]
    assert f"`{example_name(EXAMPLES / '04-cars-per-district.rq')}`" in install
    assert "--warehouse delta_tables/demo" in install
