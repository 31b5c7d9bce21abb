"""The engine's settings that only the environment gives, for every process that evaluates (the command line,
Airflow's tasks, the stack): ``CSPARQL_PANES_MIN_TRIPLES``. Read here, by the engine, so that the pure core
(``csparql.panes``) is handed values, never reads the environment. No Spark: ``csparql explain`` reads them too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PANES_MIN_TRIPLES_VARIABLE = "CSPARQL_PANES_MIN_TRIPLES"

PANE_MIN_TRIPLES = 1_000_000
"""In the ``AUTO`` pane mode (``csparql.panes.AUTO``), windows whose stream files hold fewer triples than this
are recomputed (``CSPARQL_PANES_MIN_TRIPLES`` overrides it). A window from panes costs two Spark jobs — its new
pane, then the combination — where a recompute costs one; on two cores a job costs 0.1–0.3 s whatever its
size, so panes pay off only where reading and joining the window is what costs (``docs/performance/panes.md``)."""


def pane_min_triples(environment: Mapping[str, str] | None = None) -> int:
    """The least number of triples in a window's stream files from which ``AUTO`` combines it from panes:
    ``CSPARQL_PANES_MIN_TRIPLES`` of ``environment`` (the process's by default), else ``PANE_MIN_TRIPLES``;
    ``ValueError`` for a value that is not a whole number of triples."""
    text = (os.environ if environment is None else environment).get(PANES_MIN_TRIPLES_VARIABLE)
    if text is None or not text.strip():
        return PANE_MIN_TRIPLES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{PANES_MIN_TRIPLES_VARIABLE}={text!r} is not a whole number of triples") from None
    if value < 0:
        raise ValueError(f"{PANES_MIN_TRIPLES_VARIABLE}={text!r} is negative")
    return value
