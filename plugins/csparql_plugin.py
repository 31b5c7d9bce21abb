"""The Airflow plugin of csparql: registers the query timetable with every Airflow component, and adds the
C-SPARQL pages to the api-server and the UI.

- ``fastapi_apps``: the pages' app (``csparql.web.app``) at ``/csparql``. It is built only when
  the api-server asks for it, so the scheduler, DAG processor, triggerer and task runners never import it.
- ``external_views``: "C-SPARQL" in the Browse menu (the queries, the register page, the streams), and a
  "Query" tab on every DAG's page (``{DAG_ID}`` is filled in by the UI; a DAG that is not a query says so).

Airflow loads each ``.py`` directly under ``plugins/`` as a top-level module; the ``csparql`` package itself is
listed in ``.airflowignore`` so that its modules (e.g. ``statistics``) are not loaded under bare names.
"""

from airflow.plugins_manager import AirflowPlugin

from csparql.orchestration.timetable import WindowTimetable

UI_PREFIX = "/csparql"


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
