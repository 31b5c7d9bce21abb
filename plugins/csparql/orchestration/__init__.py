"""The Airflow layer: registered queries as DAGs (``dags``), their schedule (``timetable``), the wait for
complete windows (``triggers``) and the tasks that wait, evaluate and ingest (``operators``).

Thin by design: what to run is decided by ``csparql.deploy`` (pure), how to run it by ``csparql.engine``.
Only Airflow processes import this package; the plugin (``csparql.plugin``) registers the timetable.
"""
