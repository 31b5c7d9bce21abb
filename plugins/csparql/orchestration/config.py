"""The settings of an Airflow component: Airflow's ``[csparql]`` configuration section
(``csparql.deploy.settings.Settings.from_airflow``), read once per call, and the S3 endpoint and credentials of
the connection ``aws_conn_id`` names, given to the component's process as the standard AWS variables."""

from __future__ import annotations

import json
import os

from csparql.deploy.settings import Settings
from csparql.storage.location import ensure_delta_rs_environment

CONNECTION_VARIABLES = {"login": "AWS_ACCESS_KEY_ID", "password": "AWS_SECRET_ACCESS_KEY"}
EXTRA_VARIABLES = {"endpoint_url": "AWS_ENDPOINT_URL", "region_name": "AWS_REGION",
                   "aws_session_token": "AWS_SESSION_TOKEN"}
"""Which field of an Airflow ``aws`` connection gives which AWS variable (the Amazon provider's own names;
``extra`` may also hold ``aws_access_key_id`` and ``aws_secret_access_key``)."""


def deployment_settings() -> Settings:
    """The ``[csparql]`` section of this process's Airflow configuration (``AIRFLOW__CSPARQL__*``,
    ``airflow.cfg``), ``CSPARQL_*`` for options it leaves at their defaults, defaults under ``AIRFLOW_HOME``.
    With ``aws_conn_id`` set, that connection's endpoint and credentials become this process's AWS variables
    (``apply_aws_connection``)."""
    from airflow.configuration import conf

    settings = Settings.from_airflow(conf)
    if settings.aws_conn_id:
        apply_aws_connection(settings.aws_conn_id)
    return settings


def aws_variables(connection) -> dict[str, str]:
    """The standard AWS variables an Airflow ``aws`` connection gives (only the fields it sets)."""
    extra = connection.extra_dejson if hasattr(connection, "extra_dejson") else json.loads(connection.extra or "{}")
    found = {variable: getattr(connection, field) for field, variable in CONNECTION_VARIABLES.items()
             if getattr(connection, field, None)}
    found.update({variable: str(extra[field]) for field, variable in EXTRA_VARIABLES.items() if extra.get(field)})
    if extra.get("aws_access_key_id"):
        found["AWS_ACCESS_KEY_ID"] = str(extra["aws_access_key_id"])
    if extra.get("aws_secret_access_key"):
        found["AWS_SECRET_ACCESS_KEY"] = str(extra["aws_secret_access_key"])
    return found


def apply_aws_connection(conn_id: str) -> None:
    """Set this process's AWS variables from the Airflow connection ``conn_id`` (what delta-rs, pyarrow and
    the Spark sessions csparql starts read). ``ValueError`` naming it when it does not exist."""
    from airflow.sdk import Connection

    try:
        connection = Connection.get(conn_id)
    except Exception as error:  # noqa: BLE001 - Airflow raises its own not-found error types
        raise ValueError(f"[csparql] aws_conn_id: the Airflow connection {conn_id!r} cannot be read: "
                         f"{' '.join(str(error).split())[:200]}") from None
    os.environ.update(aws_variables(connection))
    # settings read before the connection (the warehouse's location) could not yet see a plain-HTTP endpoint
    ensure_delta_rs_environment()
