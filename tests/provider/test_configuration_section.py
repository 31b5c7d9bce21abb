"""What Airflow's own commands show of the provider, run as a user runs them (``airflow`` of this environment,
a fresh ``AIRFLOW_HOME``): the README's ``airflow config`` commands show every ``[csparql]`` option with its
default, its description and an example, and ``airflow providers list`` shows the provider's description as
it is written."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from csparql.deploy.provider import get_provider_info
from csparql.deploy.settings import OPTION_EXAMPLES, OPTIONS
from support import ROOT

pytestmark = pytest.mark.airflow

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def airflow(home: Path, *arguments: str) -> str:
    """Run ``airflow`` with a fresh home and nothing of this process's Airflow or csparql settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CSPARQL_"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run([AIRFLOW, *arguments], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def readme_config_commands() -> list[list[str]]:
    """The ``airflow config`` commands of the README's *Install into your Airflow* section."""
    section = re.split(r"^## ", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.M)
    [install] = [part for part in section if part.startswith("Install into your Airflow")]
    lines = [line for block in re.findall(r"^```bash\n(.*?)^```", install, flags=re.M | re.S)
             for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.startswith("airflow config ")]


def test_the_readme_s_config_commands_show_every_option_with_its_default_description_and_example(tmp_path):
    home = tmp_path / "airflow"
    listing, value = readme_config_commands()
    assert listing[:3] == ["airflow", "config", "list"] and value[:3] == ["airflow", "config", "get-value"]
    shown = airflow(home, *listing[1:])
    for option in OPTIONS:
        default = option.airflow_default.replace("{AIRFLOW_HOME}", str(home))
        assert re.search(rf"^{option.key} = {re.escape(default)}$", shown, re.M), option.key
        assert f"# {option.description}" in shown, option.key
        if option.key in OPTION_EXAMPLES:
            assert f"# Example: {option.key} = {OPTION_EXAMPLES[option.key]}" in shown
    assert airflow(home, *value[1:]).strip() == f"{home}/csparql/warehouse"


def test_airflow_lists_the_provider_s_description_as_written(tmp_path):
    providers = json.loads(airflow(tmp_path / "airflow", "providers", "list", "--output", "json"))
    [csparql] = [p for p in providers if p["package_name"] == "csparql"]
    assert csparql["description"] == get_provider_info()["description"].rstrip(".")
