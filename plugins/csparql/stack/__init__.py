"""The stack supervisor: ``csparql stack``, the product on one machine. ``airflow_stack`` runs Airflow's
components (scheduler, DAG processor, triggerer, api-server) on loopback with SQLite and the LocalExecutor,
each in its own process group, restarting one that exits; ``embedded`` adds the one warm Spark (a local Spark
Connect server), registers the examples, lands the sample streams and backfills. It drives the ``airflow``
command and the REST API and imports no Airflow (``tests/test_architecture.py``).
"""
