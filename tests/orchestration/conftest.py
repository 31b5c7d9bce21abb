"""Airflow reads its settings from the environment when first imported: every orchestration test runs with
an AIRFLOW_HOME of its own (never the user's) and the repository's plugins."""

import os
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
_HOME = tempfile.mkdtemp(prefix="csparql-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(REPOSITORY / "plugins"))
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
