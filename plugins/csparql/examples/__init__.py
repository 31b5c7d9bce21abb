"""The example queries shipped with the package (data, not code): ``queries/`` holds every query the
specification prints (``csparql demo`` and ``csparql stack`` use them), ``srbench/`` the 17 SRBench queries.
The checkout's ``examples/queries`` and ``examples/srbench`` point here."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def examples_folder(name: str) -> Path:
    """The folder ``name`` (``queries`` or ``srbench``) of the installed package's examples."""
    return Path(str(files("csparql") / "examples" / name))
