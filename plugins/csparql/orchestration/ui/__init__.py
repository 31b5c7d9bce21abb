"""The C-SPARQL pages inside the Airflow UI: a FastAPI app (``app``) mounted by the plugin at ``/csparql``,
its Jinja2 templates and static files, server-side SVG charts (``charts``) and what it reads and changes in
Airflow's database (``airflow_state``). What the pages show is computed without Airflow by
``csparql.monitoring`` and ``csparql.preview``.
"""
