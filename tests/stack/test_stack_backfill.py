"""``AirflowStack.backfill`` against the answers a busy api-server gives.

On SQLite, the api-server can answer 503 to ``POST /backfills`` after it stored the backfill, and then 409 to
the retry. That cannot be provoked on demand from a real server, so these tests script the REST answers
(``api`` is the only thing replaced); the real server is exercised by the end-to-end tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from csparql.stack import airflow_stack as stack_module
from csparql.stack.airflow_stack import AirflowStack, StackError

START, END = "2010-03-22T08:30:00Z", "2010-03-22T09:00:00Z"


def backfill(id_: int, completed: bool = False) -> dict:
    return {"id": id_, "dag_id": "q", "from_date": START, "to_date": END,
            "completed_at": "2026-11-24T00:00:00Z" if completed else None}


class ScriptedStack(AirflowStack):
    """An AirflowStack whose REST answers come from a script: ``posts`` answer each POST in turn, ``stored``
    is what ``GET /backfills`` lists (a POST answered 503 may still add to it)."""

    def __init__(self, posts: list[tuple[dict, dict | None]], stored: list[dict],
                 without_run: list[list[str]] | None = None):
        super().__init__(home=Path("/nonexistent"), dags=Path("/nonexistent"), settings_environment={})
        self.posts = list(posts)
        self.stored = list(stored)
        self.without_run = list(without_run or [])  # what each dry run (reprocess "none") answers in turn
        self.requests: list[tuple[str, str, dict | None]] = []

    def api(self, method, path, body=None, allow=(), attempts=5, idempotent=None):
        self.requests.append((method, path, body))
        if method == "GET":
            return {"backfills": list(self.stored)}
        if path == "backfills/dry_run":
            dates = self.without_run.pop(0) if self.without_run else []
            return {"backfills": [{"dag_id": "q", "logical_date": d} for d in dates], "total_entries": len(dates)}
        answer, stores = self.posts.pop(0)
        if stores is not None:
            self.stored.append(stores)
        if "status" in answer and answer["status"] not in allow:  # as the real api() does
            raise StackError(f"POST {path} answered {answer['status']}")
        return answer


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(stack_module.time, "sleep", lambda seconds: None)


def test_a_backfill_stored_despite_a_503_is_recognised_by_the_409_that_follows():
    stack = ScriptedStack(posts=[({"status": 503}, backfill(2)), ({"status": 409}, None)], stored=[])
    assert stack.backfill("q", START, END)["id"] == 2


def test_an_older_unfinished_backfill_of_the_same_range_is_not_taken_for_the_new_one():
    # The first backfill (1) is not yet marked complete; the retry's 503 stored nothing, so the 409 is about
    # backfill 1, and the request must go on until the new backfill (3) is created.
    stack = ScriptedStack(
        posts=[({"status": 503}, None), ({"status": 409}, None), ({"status": 409}, None), (backfill(3), backfill(3))],
        stored=[backfill(1)],
    )
    assert stack.backfill("q", START, END, reprocess="completed")["id"] == 3
    assert not stack.posts


def test_a_409_without_an_earlier_503_is_waited_out():
    stack = ScriptedStack(posts=[({"status": 409}, None), (backfill(5), backfill(5))], stored=[backfill(4, True)])
    assert stack.backfill("q", START, END)["id"] == 5


def test_a_500_of_a_database_locked_past_its_timeout_is_tried_again_like_a_503():
    stack = ScriptedStack(posts=[({"status": 500}, None), (backfill(7), backfill(7))], stored=[])
    assert stack.backfill("q", START, END)["id"] == 7


def test_a_backfill_stored_with_only_some_of_its_runs_is_completed_by_a_second_backfill():
    # The 503 left backfill 2 with two runs of three (SQLite stayed locked while Airflow created them). Once it
    # is complete, the window still without a run is backfilled (reprocess "none": the others are left alone).
    stack = ScriptedStack(
        posts=[({"status": 503}, backfill(2)), ({"status": 409}, None), (backfill(3), backfill(3))],
        stored=[], without_run=[["2010-03-22T09:00:00Z"]],
    )
    stack.wait_for_backfills = lambda dag_id, timeout: stack.stored.__setitem__(0, backfill(2, completed=True))
    assert stack.backfill("q", START, END, reprocess="completed")["id"] == 3
    last_post = [body for method, path, body in stack.requests if (method, path) == ("POST", "backfills")][-1]
    assert last_post["reprocess_behavior"] == "none"
    assert (last_post["from_date"], last_post["to_date"]) == (START, END)
    assert not stack.posts


def test_a_backfill_stored_with_all_its_runs_during_a_503_is_not_repeated():
    stack = ScriptedStack(posts=[({"status": 503}, backfill(2)), ({"status": 409}, None)], stored=[],
                          without_run=[[]])
    assert stack.backfill("q", START, END)["id"] == 2
    assert ("POST", "backfills/dry_run") in [(m, p) for m, p, _ in stack.requests]
