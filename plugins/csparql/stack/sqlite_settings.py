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
expected to update 2 row(s); 0 were matched``, and the scheduler exited.

``SQLiteConnection`` gives a ``SAVEPOINT`` outside a transaction the transaction it needs: ``BEGIN
IMMEDIATE`` first. The nested block is then part of one transaction that commits or rolls back as a whole (a
backfill's runs appear together or not at all), and it holds SQLite's write lock from its start, waiting for
it as any writer does (the ``timeout``) instead of failing on a stale read.

Writes on an event loop. A write about to begin on a thread running an asyncio event loop, while another
connection of the process has a transaction open, is refused at once (``_refuse_a_wait_that_blocks_its_own_holder``
says why): waiting would stop the event loop that other transaction needs in order to end.
"""

import asyncio
import sqlite3
import weakref

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "SAVEPOINT")

_connections: weakref.WeakSet = weakref.WeakSet()
"""Every ``SQLiteConnection`` of this process."""


class SQLiteCursor(sqlite3.Cursor):
    """A cursor that opens a real transaction (``BEGIN IMMEDIATE``) before a ``SAVEPOINT`` issued outside
    one, so that releasing the savepoint does not commit; and that refuses at once, rather than after the
    busy timeout, a write that would wait on an event loop for a transaction only that event loop can end."""

    def execute(self, sql, parameters=(), /):
        if not self.connection.in_transaction:
            statement = sql.lstrip()[:9].upper()
            if statement.startswith(WRITES):
                _refuse_a_wait_that_blocks_its_own_holder(self.connection)
            if statement == "SAVEPOINT":
                super().execute("BEGIN IMMEDIATE")
        return super().execute(sql, parameters)


class SQLiteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection whose cursors are ``SQLiteCursor``."""

    def __init__(self, *arguments, **options):
        super().__init__(*arguments, **options)
        _connections.add(self)

    def cursor(self, factory=SQLiteCursor):
        return super().cursor(factory)


def _refuse_a_wait_that_blocks_its_own_holder(connection: sqlite3.Connection) -> None:
    """Raise "database is locked" when a write is about to begin on a thread running an asyncio event loop
    while another connection of this process has a transaction open.

    Airflow's api-server writes its audit log from an ``async`` dependency, on the event loop, with a blocking
    session; the requests served in worker threads commit their sessions when the event loop runs their
    clean-up. When one of those holds SQLite's write lock, the audit write waits for it and, by waiting,
    stops the event loop that would commit it: the whole api-server, and every component waiting for the
    lock, stood still for the busy timeout (a minute), and the triggerer exited on "database is locked".
    Refused at once, the request fails alone (500, or 503 for a backfill; the stack tries again) and the
    event loop goes on."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread or a synchronous component: waiting for the lock is safe
    for other in list(_connections):
        if other is connection:
            continue
        try:
            open_elsewhere = other.in_transaction
        except sqlite3.ProgrammingError:  # closed
            continue
        if open_elsewhere:
            raise sqlite3.OperationalError(
                "database is locked: another transaction of this process is open, and it ends only when "
                "this event loop runs again (waiting here would stop both until the busy timeout)")


CONNECT_ARGS = {"timeout": 60, "factory": SQLiteConnection}
