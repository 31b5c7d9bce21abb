"""Applications ``spark-submit`` runs, shipped inside the package: ``job_path(name)`` is the file to submit,
found through ``importlib.resources`` wherever the package is installed."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

EVALUATE_WINDOW = "evaluate_window.py"
LOG4J_CONFIGURATION = Path(str(files("csparql") / "runtime" / "log4j2.properties"))
"""The log4j configuration the jobs' drivers are started with (quiet Spark logs)."""


def job_path(name: str = EVALUATE_WINDOW) -> Path:
    """The file of the job ``name`` in the installed package (a real file: spark-submit reads it by path)."""
    return Path(str(files("csparql") / "jobs" / name))
