"""``AirflowStack.backfill`` against the answers a busy api-server gives.

On SQLite, the api-server can answer 503 to ``POST /backfills`` after it stored the backfill, and then 409 to
the retry. That cannot be provoked on demand from a real server, so these tests script the REST answers
(``api`` is the only thing replaced); the real server is exercised by the end-to-end tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from csparql.orchestration import stack as stack_module
from csparql.orchestration.stack import AirflowStack, StackError

START, END = "2010-03-22T08:30:00Z", "2010-03-22T09:00:00Z"


def backfill(id_: int, completed: bool = False) -> dict:
    return {"id": id_, "dag_id": "q", "from_date": START, "to_date": END,
            "completed_at": "2026-11-24T00:00:00Z" if completed else None}


class ScriptedStack(AirflowStack):
    """An AirflowStack whose REST answers come from a script: ``posts`` answer each POST in turn, ``stored``
    is what ``GET /backfills`` lists (a POST answered 503 may still add to it)."""

    def __init__(self, posts: list[tuple[dict, dict | None]], stored: list[dict]):
        super().__init__(home=Path("/nonexistent"), dags=Path("/nonexistent"), settings_environment={})
        self.posts = list(posts)
        self.stored = list(stored)

    def api(self, method, path, body=None, allow=(), attempts=5):
        if method == "GET":
            return {"backfills": list(self.stored)}
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
