"""Helpers the tests share: where fixtures live and how fixture files are read."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
SPEC_QUERIES = ROOT / "examples" / "queries"
REFUSED_SPEC_QUERIES = SPEC_QUERIES / "refused"
"""The specification's queries that must be refused, kept apart so that ``csparql check examples/queries/*.rq``
checks the valid ones."""
LANGUAGE_FIXTURES = FIXTURES / "language"
REQUIRE_TOOLS = "CSPARQL_TESTS_REQUIRE_TOOLS"
"""Set to 1 by ``.ci/run``, which installs every system tool the suite uses: a missing one then fails the test."""


def use_a_private_airflow_home() -> None:
    """Airflow reads its settings from the environment when first imported: the tests that import or run it
    get an ``AIRFLOW_HOME`` of their own (never the user's), no example DAGs and the repository's plugins
    (what is set already is kept: one home for the whole session, removed when the process exits)."""
    if "AIRFLOW_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix="csparql-airflow-home-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["AIRFLOW_HOME"] = home
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(ROOT / "plugins"))
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")


def tool_missing(reason: str) -> NoReturn:
    """Stop a test that needs a system tool this machine lacks (docker-compose, Chromium): a skip on a
    developer's machine, a failure where ``$CSPARQL_TESTS_REQUIRE_TOOLS`` is 1, as in CI."""
    if os.environ.get(REQUIRE_TOOLS) == "1":
        pytest.fail(f"{reason} ({REQUIRE_TOOLS}=1: .ci/run should have installed it)", pytrace=False)
    pytest.skip(reason)


@dataclass
class Block:
    """One case of a fixture file: its name, its ``# key: value`` metadata lines, and its text."""

    name: str
    text: str
    meta: dict[str, list[str]] = field(default_factory=dict)


def read_blocks(path: Path, metadata_keys: tuple[str, ...] = ()) -> list[Block]:
    """The cases of a fixture file made of ``### name`` blocks.

    Lines ``# key: value`` right after the header, for the given keys, are metadata and not part of the text;
    the text keeps everything else, without its trailing newlines.
    """
    blocks: list[Block] = []
    content = path.read_text(encoding="utf-8")
    parts = re.split(r"^### (.+)$", content, flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2]):
        lines = body.split("\n")[1:]
        meta: dict[str, list[str]] = {}
        while lines and any(lines[0].startswith(f"# {key}:") for key in metadata_keys):
            key, _, value = lines.pop(0)[2:].partition(":")
            meta.setdefault(key.strip(), []).append(value.strip())
        blocks.append(Block(name.strip(), "\n".join(lines).rstrip("\n"), meta))
    return blocks


def spec_query_files() -> list[Path]:
    """The example queries of the specification, each with an ``# expect:`` header: the valid ones and the
    refused ones (``examples/queries/refused/``), by file name."""
    return sorted([*SPEC_QUERIES.glob("*.rq"), *REFUSED_SPEC_QUERIES.glob("*.rq")], key=lambda path: path.name)


def expected_outcome(path: Path) -> str:
    """``ok`` or ``error``, from the ``# expect:`` line of a specification query."""
    match = re.search(r"^# expect: (ok|error)", path.read_text(encoding="utf-8"), flags=re.M)
    assert match, f"{path.name} has no '# expect:' header"
    return match.group(1)
