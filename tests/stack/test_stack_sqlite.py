"""The embedded stack's SQLite connections (``csparql.stack.sqlite_settings``), as Airflow opens them: a nested
transaction (``Session.begin_nested()``) begun outside a transaction is part of one real transaction.

Airflow creates a backfill that way: the backfill committed, then one nested block per run, all committed by
the outer session at the end. With Python's ``sqlite3`` as it is, each run was committed on its own when its
block ended, the scheduler started them, and when the api-server then failed (a write after a stale read:
"database is locked") its clean-up deleted them under the scheduler, which exited with ``StaleDataError``.
The same pattern here on a real SQLite file in WAL mode, as the stack runs it; the other process is a second
connection.

And the api-server's audit log, written on its event loop while a request served in a worker thread holds the
write lock until the event loop runs that request's clean-up: the wait stopped the api-server, and every
component waiting for the lock, for the busy timeout (a minute; the triggerer exited)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from csparql.stack.sqlite_settings import CONNECT_ARGS


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "airflow.db"
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")  # as AirflowStack.set_up
        setup.execute("CREATE TABLE dag_run (id INTEGER PRIMARY KEY, run_id TEXT)")
    engine = sa.create_engine(f"sqlite:///{path}", connect_args=CONNECT_ARGS)  # as Airflow builds its engine
    yield path, engine
    engine.dispose()


def run_ids(path) -> list[str]:
    """What another process sees: the committed runs."""
    with sqlite3.connect(path) as other:
        return [row[0] for row in other.execute("SELECT run_id FROM dag_run ORDER BY id")]


def test_runs_created_in_nested_blocks_are_committed_together_with_the_outer_transaction(database):
    path, engine = database
    with Session(engine) as api_server:
        api_server.execute(sa.text("SELECT 1"))
        api_server.commit()  # the backfill is committed first
        for run_id in ("backfill__10:50", "backfill__10:55"):
            with api_server.begin_nested():  # one block per run
                api_server.execute(sa.text("SELECT count(*) FROM dag_run"))
                api_server.execute(sa.text("INSERT INTO dag_run (run_id) VALUES (:r)"), {"r": run_id})
            assert run_ids(path) == [], "a run was committed before the backfill's transaction ended"
        api_server.rollback()  # the third run failed: nothing of the backfill's runs is left
    assert run_ids(path) == []
    with Session(engine) as api_server:
        api_server.commit()
        with api_server.begin_nested():
            api_server.execute(sa.text("INSERT INTO dag_run (run_id) VALUES ('backfill__11:00')"))
        api_server.commit()
    assert run_ids(path) == ["backfill__11:00"]


def test_a_nested_block_holds_the_write_lock_from_its_start_so_another_commit_cannot_make_its_read_stale(database):
    path, engine = database
    with Session(engine) as api_server:
        api_server.commit()
        with api_server.begin_nested():
            api_server.execute(sa.text("SELECT count(*) FROM dag_run"))  # the block reads …
            with sqlite3.connect(path, timeout=0) as scheduler:  # … another process wants to write …
                try:
                    scheduler.execute("INSERT INTO dag_run (run_id) VALUES ('scheduled__07:25')")
                    scheduler.commit()
                except sqlite3.OperationalError as error:
                    assert "locked" in str(error)  # it waits for the block's transaction (here: no patience)
            # … and the block's write still succeeds (it failed with "database is locked" on a stale read)
            api_server.execute(sa.text("INSERT INTO dag_run (run_id) VALUES ('backfill__10:50')"))
        api_server.commit()
    assert run_ids(path) == ["backfill__10:50"]


def test_a_write_on_an_event_loop_is_refused_at_once_while_a_transaction_it_would_block_is_open(database):
    path, engine = database

    async def audit_log():  # as Airflow's action_logging: a blocking session inside an async dependency
        with Session(engine) as on_the_event_loop:
            on_the_event_loop.execute(sa.text("INSERT INTO dag_run (run_id) VALUES ('audit')"))
            on_the_event_loop.commit()

    with Session(engine) as request:  # a request served in a worker thread, committed by its clean-up
        request.execute(sa.text("INSERT INTO dag_run (run_id) VALUES ('manual__07:35')"))
        with pytest.raises(sa.exc.OperationalError, match="it ends only when this event loop runs again"):
            asyncio.run(audit_log())
        request.commit()
    asyncio.run(audit_log())  # nothing open any more: written
    assert run_ids(path) == ["manual__07:35", "audit"]


def test_a_request_the_api_server_refused_with_its_database_error_is_sent_again_once_it_stored_nothing(tmp_path):
    """``AirflowStack.api`` against a stand-in for the api-server on loopback (a real HTTP server answering
    as Airflow's does when such a refusal rolls a request back: 500 with ``"reason": "Database error"``): a
    POST, which is not sent twice on other server errors, is sent again after that answer and creates its run
    once; another 500 is still an error at once."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from csparql.stack.airflow_stack import AirflowStack, ServerError

    refusal = {"detail": {"reason": "Database error", "statement": "hidden", "orig_error": "hidden",
                          "message": "Serious error when handling your request. Check logs for more details"}}
    answers = {"dags/refused/dagRuns": [(500, refusal), (200, {"dag_run_id": "manual__1"})],
               "dags/broken/dagRuns": [(500, {"detail": "Internal Server Error"}), (200, {"dag_run_id": "x"})]}
    received = []

    class StandIn(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the name http.server calls
            path = self.path.removeprefix("/api/v2/")
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(path)
            status, body = answers[path].pop(0)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *arguments):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack = AirflowStack(home=tmp_path, dags=tmp_path, settings_environment={}, port=server.server_address[1])
        stack._token = "token"  # no login endpoint in the stand-in
        assert stack.api("POST", "dags/refused/dagRuns", {"logical_date": None}) == {"dag_run_id": "manual__1"}
        with pytest.raises(ServerError, match="answered 500"):
            stack.api("POST", "dags/broken/dagRuns", {"logical_date": None})
    finally:
        server.shutdown()
    assert received == ["dags/refused/dagRuns", "dags/refused/dagRuns", "dags/broken/dagRuns"]
