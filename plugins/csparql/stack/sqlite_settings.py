"""Connection arguments for the embedded stack's SQLite database (``[database] sql_alchemy_connect_args``).

Every Airflow component and worker writes to the one SQLite file; on a busy machine a writer can wait longer
than SQLite's default 5 s for the lock, and Airflow answers 500. A minute of patience (with the database in
WAL mode, set by ``AirflowStack.set_up``) removes those failures.
"""

CONNECT_ARGS = {"timeout": 60}
