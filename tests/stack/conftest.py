"""The stack's tests start Airflow's components and import the Airflow integration: with an AIRFLOW_HOME of
their own (never the user's) and the repository's plugins, as the orchestration tests."""

from support import use_a_private_airflow_home

use_a_private_airflow_home()
