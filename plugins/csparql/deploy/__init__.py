"""The deployment layer: how registered queries run in production, decided without Airflow or Spark.

- ``settings``: the deployment-wide settings, from ``CSPARQL_*`` variables;
- ``registry``: the registry's files and loaders, and what compiling each tells the others (its facts cache);
- ``plan``: the deployment of one registered query (``deployment_of``) and what each of its windows waits for;
- ``history``: every saved version of every query (``text_version``, ``versions``);
- ``registration``: registering and unregistering queries;
- ``preview``: what registering a text would do, before it is saved;
- ``monitoring``: what the pages show of queries and streams, read from the warehouse.

The Airflow integration (``csparql.orchestration``), the web pages (``csparql.web``) and the stack supervisor
(``csparql.stack``) build on it; it imports neither Airflow nor Spark (``tests/test_architecture.py``).
"""
