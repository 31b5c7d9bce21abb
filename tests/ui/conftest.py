"""One real Airflow serves every test of this package: api-server, scheduler, DAG processor and triggerer on
loopback (SQLite, LocalExecutor), with the repository's plugin — the C-SPARQL pages at ``/csparql`` — and two
logins: ``admin`` (admin role) and ``viewer`` (viewer role: may read, may not change DAGs).

The warehouse holds the sample Milan tollgates stream (one hour from 2010-03-22T08:00Z, its watermark at its
last triple) and the default static graph, landed by the engine before Airflow starts.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from csparql import samples
from csparql.deploy.settings import Settings
from csparql.stack.airflow_stack import AirflowStack, free_port
from support import use_a_private_airflow_home

REPOSITORY = Path(__file__).resolve().parents[2]
use_a_private_airflow_home()

MILAN = samples.STREAMS["milantollgates"]
VIEWER = ("viewer", "viewer-password")
PUSH_MAX_BYTES = 1 << 20
"""The largest body a push may have here (``push_max_bytes``), so that an oversized one is quick to send."""
SCREENSHOTS = REPOSITORY / "tests" / "artifacts" / "screenshots"


@dataclass
class UI:
    root: Path
    files: samples.SampleFiles
    settings: Settings
    stack: AirflowStack

    @property
    def url(self) -> str:
        return self.stack.url

    def token(self, who: str = "admin") -> str:
        if who == "admin":
            return self.stack.token()
        return self.stack.token_for(*VIEWER)


@pytest.fixture(scope="package")
def ui(tmp_path_factory, spark) -> UI:
    from csparql.ingest.ingest import ingest_stream, load_static

    root = tmp_path_factory.mktemp("ui")
    files = samples.write_samples(root / "samples", hours=1)
    dags = root / "dags"
    (dags / "queries").mkdir(parents=True)
    environment = {
        "CSPARQL_REGISTRY": str(dags / "queries"),
        "CSPARQL_WAREHOUSE": str(root / "warehouse"),
        "CSPARQL_ALLOWED_LATENESS": "0s",
        "CSPARQL_WAIT_TIMEOUT": "1d",  # scheduled runs of today's (empty) windows just wait
        "CSPARQL_POLL_INTERVAL": "2s",
        "CSPARQL_PUSH_MAX_BYTES": str(PUSH_MAX_BYTES),
    }
    settings = Settings.from_environment(environment)
    load_static(spark, settings.warehouse, None, [files.graphs[None]], replace=True)
    ingest_stream(spark, settings.warehouse, MILAN, [files.streams[MILAN]])
    stack = AirflowStack(home=root / "airflow", dags=dags, settings_environment=environment, port=free_port(),
                         pool_slots=2, other_users={VIEWER[0]: ("viewer", VIEWER[1])})
    stack.set_up()
    stack.start()
    stack.supervise_in_background()  # as csparql stack does: the scheduler may exit on a database error
    try:
        stack.wait_until_healthy()
        yield UI(root, files, settings, stack)
    finally:
        stack.stop()


@pytest.fixture(scope="package")
def screenshots() -> Path:
    """Where the browser tests leave a screenshot of each page (git-ignored, kept after the run)."""
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS
