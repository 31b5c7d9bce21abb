"""The C-SPARQL pages inside the Airflow UI: a FastAPI app (``app``) mounted by the plugin at ``/csparql``,
one router per page (``pages``), the login and permissions every route checks (``security``), how pages and
JSON answers are rendered (``views``, with the Jinja2 templates and static files), server-side SVG charts
(``charts``) and what it reads and changes in Airflow's database (``airflow_state``). What the pages show is
computed without Airflow by ``csparql.deploy.monitoring`` and ``csparql.deploy.preview``. No Spark here.
"""
