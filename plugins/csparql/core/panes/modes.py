"""How a query's windows are computed from panes — the mode a registry file or a setting names — apart from
the pane algebra itself: the deployment layer reads a query's mode when Airflow builds its DAG, which must not
load the algebra (``csparql.core.panes`` loads it on first use)."""

from __future__ import annotations

AUTO, ALWAYS, OFF = "auto", "always", "off"
"""How a query's windows are computed (``# csparql panes auto|always|off``): ``AUTO`` (the default) from panes
where that is expected to cost less than recomputing — the query allows it, its partials are not keyed (a
keyed pane keeps a row per stream solution, so combining a window reads as many rows as recomputing it), and
the window's stream files hold at least the engine's minimum (``csparql.engine.panes.pane_min_triples``,
``CSPARQL_PANES_MIN_TRIPLES``); ``ALWAYS``
whenever the query allows it; ``OFF`` never (every window recomputed, the reference)."""
PANE_MODES = (AUTO, ALWAYS, OFF)


def pane_mode(value: str | bool | None) -> str:
    """A pane mode from a setting: one of ``PANE_MODES``, ``on`` for ``ALWAYS``, None for ``AUTO``;
    ``ValueError`` otherwise."""
    if value is None:
        return AUTO
    text = str(value).strip().lower()
    text = ALWAYS if text == "on" else text
    if text not in PANE_MODES:
        raise ValueError(f"panes take {', '.join(PANE_MODES)} (or on, for always), not {value!r}")
    return text
