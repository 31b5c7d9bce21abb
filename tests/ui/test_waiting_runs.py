"""A past window evaluated from a query's page is not held up by runs waiting for data that is not coming: with
the DAG's four active runs all waiting for today's windows, the waiting note's window (``/trigger`` with
``backfill``) and then a past window asked with *Trigger a run* each run as a one-window backfill and write their
window."""

from __future__ import annotations

import time

import httpx

QUERY = """REGISTER QUERY WaitingGates COMPUTED EVERY 1m AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?tollgate (COUNT(?car) AS ?passages)
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 1m STEP 1m]
WHERE { ?tollgate t:registers ?car . }
GROUP BY ?tollgate
"""
NAME = "waiting_gates"


def states(ui) -> dict[str, str]:
    return {run["dag_run_id"]: run["state"] for run in ui.stack.dag_runs(NAME)}


def wait_until(check, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(2)
    raise AssertionError(f"timed out after {timeout:.0f} s")


def test_the_waiting_notes_past_window_runs_while_the_dags_active_runs_wait_for_data(ui):
    headers = {"Accept": "application/json", "Authorization": f"Bearer {ui.token()}"}
    with httpx.Client(base_url=f"{ui.url}/csparql", headers=headers, timeout=60) as admin:
        assert admin.post("/queries", data={"name": NAME, "text": QUERY}).status_code == 200
        ui.stack.wait_for_dags([NAME])
        assert admin.post(f"/queries/{NAME}/unpause").status_code == 200
        for _ in range(4):  # windows of now: the stream's data ends in 2010, so each waits
            assert admin.post(f"/queries/{NAME}/trigger", data={"window_end": ""}).status_code == 200
        wait_until(lambda: sum(state == "running" for state in states(ui).values()) >= 4, 180)
        for data in ({"window_end": "2010-03-22T08:30:00Z", "backfill": "1"}, {"window_end": "2010-03-22T08:20:00Z"}):
            answer = admin.post(f"/queries/{NAME}/trigger", data=data)
            assert answer.status_code == 200, answer.text
            run = answer.json()["run_id"]
            assert run.startswith("backfill__"), run  # a manual run would stay queued behind the waiting ones
            wait_until(lambda: states(ui).get(run) == "success", 600)
            # Airflow runs one backfill of a DAG at a time: the next one can be created once this one is done
            wait_until(lambda: all(b.get("completed_at") for b in ui.stack.api(
                "GET", f"backfills?dag_id={NAME}").get("backfills", [])), 120)
        assert sum(state == "running" for state in states(ui).values()) >= 4  # still waiting meanwhile
        written = {w["window_end"]: w["state"] for w in admin.get(f"/api/queries/{NAME}").json()["windows"]}
        assert written["2010-03-22T08:30:00Z"] == written["2010-03-22T08:20:00Z"] == "complete"
        admin.post(f"/queries/{NAME}/pause")
