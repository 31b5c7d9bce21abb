"""Spark through Airflow connections of the Spark provider's own types.

A ``spark_connect`` connection (``SparkConnectHook``) names a Spark Connect server: evaluations and ingests
run as its clients. A ``spark`` connection (``SparkSubmitHook``) names a cluster that takes spark-submitted
applications: evaluations are submitted there, ingests run in a local Spark. The connection's type says which;
its URL is built by the provider's hooks, never parsed here.
"""

from __future__ import annotations

import dataclasses

from airflow.exceptions import AirflowException

from csparql.deploy.settings import Settings

CONNECTION_MODES = {"spark_connect": "connect", "spark": "standalone"}
"""The Spark mode (``csparql.deploy.settings.SPARK_MODES``) of each Spark provider connection type."""


def spark_mode_of(conn_id: str) -> str:
    """The Spark mode the Airflow connection ``conn_id`` stands for (``CONNECTION_MODES``); ``AirflowException``
    with one line saying what is wrong when there is no such connection or it is of another type."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise AirflowException(
            f"there is no Airflow connection {conn_id!r}: create it with `airflow connections add {conn_id} "
            "--conn-type spark_connect --conn-host HOST --conn-port PORT` (or --conn-type spark for spark-submit)"
        ) from None
    mode = CONNECTION_MODES.get(connection.conn_type or "")
    if mode is None:
        raise AirflowException(
            f"the Airflow connection {conn_id!r} is of type {connection.conn_type!r}: csparql runs Spark through a "
            "'spark_connect' connection (a Spark Connect server) or a 'spark' connection (spark-submit)"
        )
    return mode


def settings_for_connection(settings: Settings, conn_id: str | None) -> Settings:
    """``settings`` with Spark where the connection ``conn_id`` says (its type decides the mode); ``settings``
    unchanged when ``conn_id`` is None (``CSPARQL_SPARK`` and ``CSPARQL_SPARK_CONN_ID`` decide)."""
    if conn_id is None:
        return settings
    return dataclasses.replace(settings, spark=spark_mode_of(conn_id), spark_conn_id=conn_id)


def connect_url(settings: Settings) -> str:
    """The client URL of the Spark Connect server the Airflow connection ``settings.connection_id`` names."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id=settings.connection_id).get_connection_url()


def evaluation_engine(settings: Settings):
    """The engine evaluations run with where ``settings.spark`` says: a client of the Spark Connect server of
    ``settings.connection_id`` (``connect``), else the process's own Spark (``local``)."""
    from csparql.engine.runner import Engine
    from csparql.runtime.session import spark_session

    return Engine(settings.warehouse, spark_session(connect_url(settings) if settings.spark == "connect" else None))
