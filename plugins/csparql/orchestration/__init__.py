"""The Airflow layer: registered queries as DAGs (``dags``), their schedule (``timetable``), the wait for
complete windows and, with Spark Connect, their evaluation (``triggers``), the public operators that wait,
evaluate and ingest (``operators``), Spark through Airflow connections (``connections``), the Assets of tables
(``assets``), OpenLineage lineage (``lineage``) and the DAG factory ``csparql_dags()`` (``factory``).

Thin by design: what to run is decided by ``csparql.deploy`` (pure), how to run it by ``csparql.engine``.
Only Airflow processes import this package; the plugin (``csparql.plugin``) registers the timetable.
"""
