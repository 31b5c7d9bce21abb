"""The documentation site builds strictly from ``docs/`` (``mkdocs.yml``): a broken link or anchor, a page
missing from the navigation, a docstring the API reference cannot read fails the build, and so this test. The
options table of the orchestration page is generated from the options the code reads, and the tables page
describes every column of every table csparql writes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from csparql.deploy.settings import OPTIONS
from support import ROOT


def test_the_site_builds_strictly_with_every_option_and_the_api_reference(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    orchestration = (site / "orchestration" / "index.html").read_text(encoding="utf-8")
    for option in OPTIONS:
        assert re.search(rf"<td><code>{option.key}</code></td>\s*<td><code>{option.variable}</code></td>",
                         orchestration), option.key
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("CsparqlEvaluateWindowOperator", "CsparqlIngestOperator", "csparql_dags", "WindowCompleteTrigger",
                 "compile_query"):
        assert f'id="csparql.' in api and name in api, name
    assert (site / "semantics" / "index.html").exists() and (site / "getting-started" / "index.html").exists()


def test_the_tables_page_describes_every_column_of_every_table():
    from csparql.storage import schema

    page = (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    sections = dict(zip(*[iter(re.split(r"^#{2,3} (.+)$", page, flags=re.M)[1:])] * 2))

    def described(heading: str) -> set[str]:
        [body] = [text for title, text in sections.items() if title.startswith(heading)]
        return set(re.findall(r"^\| `([a-z_0-9<>]+)` \|", body, flags=re.M))

    for heading, table in [("SELECT", schema.WINDOW_COLUMNS + [schema.QUERY_VERSION, schema.REVISION]),
                           ("ASK", [*schema.ANSWERS, schema.REVISION]), ("CONSTRUCT", [*schema.TRIPLES, schema.REVISION]),
                           ("Streams", schema.STREAM), ("Static graphs", schema.STATIC), ("`runs`", schema.RUNS),
                           ("`stale_windows`", schema.STALE_WINDOWS), ("`statistics`", schema.STATISTICS),
                           ("`watermarks`", schema.WATERMARKS)]:
        columns = {field.name for field in table}
        assert columns <= described(heading), (heading, sorted(columns - described(heading)))
