"""Airflow's DAG processor, less the DAG-file parse Airflow asks of it for every task a trigger ended with success.

Airflow 3.3 sends every task instance that a trigger ends (``TaskSuccessEvent``, as every csparql run evaluated on
the triggerer ends) to the DAG processor as a task callback (``airflow.models.trigger``, unconditionally), and
the DAG processor forks a process that parses the task's DAG file for it, only to run nothing: the child runs
the failure and retry callbacks of a task, and for any other it logs *Task callback requested but is not a
failure callback* (``airflow.dag_processing.processor._execute_task_callbacks``). At 100 queries a minute that
is 100 forks and parses a minute, about a sixth of two cores (docs/performance/keeping-up.md).

``python -m csparql.orchestration.dag_processor [options]`` runs ``airflow dag-processor [options]`` with one change:
the manager drops such success callbacks when it fetches them (``fetch_callbacks``, which Airflow's manager
offers to override), instead of forking a process to drop them. Every other callback — a task's failure or
retry, a DAG's callbacks, e-mails — is handled by Airflow as before. The embedded stack runs its DAG processor
this way; in an Airflow of one's own, ``airflow dag-processor`` keeps working, with those parses. The class the
command builds and the child's test are Airflow internals: ``tests/orchestration/test_provider_internals.py``
pins them to the Airflow series this was written for."""

from __future__ import annotations

import sys

from airflow.callbacks.callback_requests import CallbackRequest, TaskCallbackRequest
from airflow.dag_processing.manager import DagFileProcessorManager


def runs_nothing(request: CallbackRequest) -> bool:
    """Whether the DAG processor's child would run nothing for ``request``: a task callback that is not a
    failure's or a retry's (the test its child makes)."""
    return isinstance(request, TaskCallbackRequest) and not request.is_failure_callback


class DagFileProcessorManagerWithoutIdleCallbacks(DagFileProcessorManager):
    """Airflow's DAG file processor manager, which never parses a DAG file for a callback that runs nothing."""

    def fetch_callbacks(self) -> list[CallbackRequest]:
        fetched = super().fetch_callbacks()  # claimed: the database no longer holds them
        kept = [request for request in fetched if not runs_nothing(request)]
        if len(kept) < len(fetched):
            self.log.debug("Dropped %d task success callbacks, which run nothing", len(fetched) - len(kept))
        return kept


def main(arguments: list[str] | None = None) -> None:
    """Run ``airflow dag-processor`` with ``arguments`` (default: this process's), its manager replaced by
    ``DagFileProcessorManagerWithoutIdleCallbacks``."""
    from airflow.__main__ import main as airflow_main
    from airflow.cli.commands import dag_processor_command

    dag_processor_command.DagFileProcessorManager = DagFileProcessorManagerWithoutIdleCallbacks
    sys.argv = ["airflow", "dag-processor", *(sys.argv[1:] if arguments is None else arguments)]
    airflow_main()


if __name__ == "__main__":
    main()
