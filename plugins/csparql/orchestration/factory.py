"""The DAG factory: every DAG of a registry from one line of a user's dags folder.

    from csparql.orchestration.factory import csparql_dags

    csparql_dags()

creates, in the DAG file that calls it, the DAG of every registered query, one ingestion DAG per stream the
queries read and one revision DAG per scheduled query (Airflow registers DAGs created while it imports a DAG
file, so nothing needs to be assigned). The registry and warehouse are the settings' (``CSPARQL_REGISTRY``,
``CSPARQL_WAREHOUSE``, …) unless given.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from airflow.sdk import DAG

from csparql.deploy.plan import deployment_of
from csparql.deploy.registry import DAG_ID, RegistrationError, registry_snapshot
from csparql.deploy.settings import Settings
from csparql.orchestration.dags import query_dag, stream_ingestion_dags
from csparql.orchestration.operators import operator_settings
from csparql.orchestration.revisions import revision_dags

log = logging.getLogger(__name__)


def csparql_dags(registry: str | os.PathLike | None = None, warehouse: str | os.PathLike | None = None, *,
                 conn_id: str | None = None, queries: bool = True, settings: Settings | None = None) -> dict[str, DAG]:
    """Every DAG of the registry: each registered query's, the ingestion DAGs and the revision DAGs.

    A registry file that cannot be deployed is left out, with one logged line naming the file and the problem;
    the other queries' DAGs are built all the same. The registry is looked at once (``registry_snapshot``) for
    all of them.

    Args:
        registry: The registry folder, else the settings' (``[csparql] registry``).
        warehouse: The warehouse, else the settings'.
        conn_id: The Airflow connection Spark runs through (see ``connections``), read when each task runs.
        queries: False leaves the registered queries' own DAGs out, as when the registry's loaders build them
            (one DAG file per query).
        settings: The settings to deploy with, else those of the environment.

    Returns:
        The DAGs keyed by DAG id, for a DAG file's ``globals()``.

    Example:
        ```python
        from csparql.orchestration.factory import csparql_dags; globals().update(csparql_dags())  # Airflow DAGs
        ```"""
    settings = operator_settings(settings, warehouse, registry)
    snapshot = registry_snapshot(settings)
    dags: dict[str, DAG] = {}
    if queries:
        for path in snapshot.files:
            if not DAG_ID.fullmatch(path.stem):
                log.error("%s: '%s' cannot name a registered query (letters, digits and '_'): no DAG for it",
                          path, path.stem)
                continue
            try:
                deployment = deployment_of(path, settings, snapshot)
            except RegistrationError as error:
                log.error("no DAG for %s: %s", Path(error.path).name, " ".join(error.message.split()))
                continue
            dag = query_dag(deployment, settings, conn_id=conn_id)
            dags[dag.dag_id] = dag
    dags.update(stream_ingestion_dags(settings, conn_id=conn_id, registry=snapshot))
    dags.update(revision_dags(settings, conn_id=conn_id))
    return dags
