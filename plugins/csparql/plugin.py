"""The Airflow plugin of csparql, registered through the ``airflow.plugins`` entry point (``pyproject.toml``):
it registers the query timetable with every Airflow component, and adds the C-SPARQL pages to the api-server
and the UI.

- ``fastapi_apps``: the pages' app (``csparql.web.app``) at ``/csparql``. It is built only when the
  api-server asks for it, so the scheduler, DAG processor, triggerer and task runners never import it.
- ``external_views``: "C-SPARQL" in the Browse menu (the queries, the register page, the streams), and a
  "Query" tab on every DAG's page (``{DAG_ID}`` is filled in by the UI; a DAG that is not a query says so).
"""

from __future__ import annotations

from importlib import metadata

from airflow.plugins_manager import AirflowPlugin

from csparql.orchestration.timetable import WindowTimetable

UI_PREFIX = "/csparql"
ENTRY_POINT_GROUP = "airflow.plugins"


class CsparqlPlugin(AirflowPlugin):
    name = "csparql"
    timetables = [WindowTimetable]
    external_views = [
        {"name": "C-SPARQL", "href": f"{UI_PREFIX}/", "destination": "nav", "category": "browse",
         "url_route": "csparql"},
        {"name": "Query", "href": f"{UI_PREFIX}/dags/{{DAG_ID}}", "destination": "dag", "url_route": "csparql-query"},
    ]

    @property
    def fastapi_apps(self):
        from csparql.web.app import app

        return [{"app": app, "url_prefix": UI_PREFIX, "name": "C-SPARQL"}]


def registered_by_entry_point() -> bool:
    """Whether an installed distribution registers the plugin through the ``airflow.plugins`` entry point."""
    return any(entry.value.startswith(f"{__name__}:")
               for entry in metadata.entry_points(group=ENTRY_POINT_GROUP))


def plugins_folder_classes() -> dict[str, type]:
    """What a plugins-folder module should define for Airflow: the plugin class, unless the entry point
    already registers it (Airflow would load it twice and report the second as an import error)."""
    return {} if registered_by_entry_point() else {"CsparqlPlugin": CsparqlPlugin}
