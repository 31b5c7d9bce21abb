# Airflow DAGs that ingest the streams the registered C-SPARQL queries read: one DAG per stream, landing the
# files dropped in its landing folder (see docs/orchestration.md).
from csparql.orchestration.dags import stream_ingestion_dags

globals().update(stream_ingestion_dags())
