"""``/streams``: every stream table (watermark, triples per hour, files, size, the queries reading it, its
ingestion DAG) and the static graphs."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from csparql.deploy import monitoring
from csparql.deploy.plan import deployment_of, ingest_dag_id
from csparql.deploy.registry import RegistrationError, registry_snapshot
from csparql.deploy.settings import Settings
from csparql.web import charts
from csparql.web.state import current_settings
from csparql.web.views import page

router = APIRouter()


@router.get("/streams", response_class=HTMLResponse)
def streams_page(request: Request):
    return page(request, "streams.html", **streams(current_settings(request)))


def streams(settings: Settings) -> dict:
    """Every stream table with its statistics and chart, the queries reading it, and the static graphs."""
    readers: dict[str, list[str]] = {}
    registry = registry_snapshot(settings)
    for path in registry.files:
        try:
            deployment = deployment_of(path, settings, registry)
        except RegistrationError:
            continue
        for stream in deployment.inputs:
            readers.setdefault(stream.iri, []).append(deployment.name)
    stream_rows = []
    late = monitoring.late_triples_by_stream(settings.warehouse)
    for stream in monitoring.stream_statistics(settings.warehouse):
        series = monitoring.hourly_series(stream.per_hour, 48)
        chart = charts.time_chart(series, title="Triples per hour", unit="triples", bars=True,
                                  chart_id=f"chart-{Path(stream.folder).name}")
        stream_rows.append({"stream": stream, "chart": Markup(chart), "readers": readers.get(stream.iri, []),
                            "late": late.get(stream.iri),
                            "ingest_dag": ingest_dag_id(stream.iri) if not stream.produced_by else None})
    return {"streams": stream_rows, "graphs": monitoring.static_graphs(settings.warehouse),
            "warehouse": str(settings.warehouse.root)}
