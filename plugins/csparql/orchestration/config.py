"""The settings of an Airflow component: Airflow's ``[csparql]`` configuration section
(``csparql.deploy.settings.Settings.from_airflow``), read once per call."""

from __future__ import annotations

from csparql.deploy.settings import Settings


def deployment_settings() -> Settings:
    """The ``[csparql]`` section of this process's Airflow configuration (``AIRFLOW__CSPARQL__*``,
    ``airflow.cfg``), ``CSPARQL_*`` for options it leaves at their defaults, defaults under ``AIRFLOW_HOME``."""
    from airflow.configuration import conf

    return Settings.from_airflow(conf)
