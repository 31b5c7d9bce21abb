"""Airflow reads its settings from the environment when first imported: every orchestration test runs with
an AIRFLOW_HOME of its own (never the user's) and the repository's plugins."""

from support import use_a_private_airflow_home

use_a_private_airflow_home()
