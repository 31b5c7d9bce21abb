"""The Airflow plugin of csparql: registers the query timetable with every Airflow component.

Airflow loads each ``.py`` directly under ``plugins/`` as a top-level module; the ``csparql`` package itself is
listed in ``.airflowignore`` so that its modules (e.g. ``statistics``) are not loaded under bare names.
"""

from airflow.plugins_manager import AirflowPlugin

from csparql.orchestration.timetable import WindowTimetable


class CsparqlPlugin(AirflowPlugin):
    name = "csparql"
    timetables = [WindowTimetable]
