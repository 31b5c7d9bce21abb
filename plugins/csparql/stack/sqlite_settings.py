"""Connection arguments for the embedded stack's SQLite database (``[database] sql_alchemy_connect_args``).

Every Airflow component and worker writes to the one SQLite file; on a busy machine a writer can wait longer
than SQLite's default 5 s for the lock, and Airflow answers 500. A minute of patience (with the database in
WAL mode, set by ``AirflowStack.set_up``) removes those failures.

Nested transactions. Python's ``sqlite3`` opens a transaction only before an INSERT, UPDATE, DELETE or
REPLACE. A ``SAVEPOINT`` issued outside a transaction (SQLAlchemy's ``Session.begin_nested()`` right after a
commit, or after reads only) therefore starts a transaction of its own in SQLite, and its ``RELEASE``
*commits* it: what the nested block wrote is visible to every other process at once, and the outer rollback
can no longer undo it. Airflow creates a backfill that way (the backfill committed, then one nested block per
run), so its runs were committed one by one. The scheduler started the first two; then the api-server failed
on the third ("database is locked": the nested block read, another process committed, and SQLite refuses to
let a transaction write on a stale read), and its clean-up deleted the runs it believed uncommitted. The
scheduler's next update of those two runs matched none: ``StaleDataError: UPDATE statement on table 'dag_run'
expected to update 2 row(s); 0 were matched``, and the scheduler exited (issue 25).

``SQLiteConnection`` gives a ``SAVEPOINT`` outside a transaction the transaction it needs: ``BEGIN
IMMEDIATE`` first. The nested block is then part of one transaction that commits or rolls back as a whole (a
backfill's runs appear together or not at all), and it holds SQLite's write lock from its start, waiting for
it as any writer does (the ``timeout``) instead of failing on a stale read.
"""

import sqlite3


class SQLiteCursor(sqlite3.Cursor):
    """A cursor that opens a real transaction (``BEGIN IMMEDIATE``) before a ``SAVEPOINT`` issued outside
    one, so that releasing the savepoint does not commit."""

    def execute(self, sql, parameters=(), /):
        if not self.connection.in_transaction and sql.lstrip()[:9].upper() == "SAVEPOINT":
            super().execute("BEGIN IMMEDIATE")
        return super().execute(sql, parameters)


class SQLiteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection whose cursors are ``SQLiteCursor``."""

    def cursor(self, factory=SQLiteCursor):
        return super().cursor(factory)


CONNECT_ARGS = {"timeout": 60, "factory": SQLiteConnection}
