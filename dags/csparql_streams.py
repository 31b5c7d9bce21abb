# Airflow DAGs that ingest the streams the registered C-SPARQL queries read: one DAG per stream, landing the
# files dropped in its landing folder; and one DAG per scheduled query that revises the windows late triples made
# stale (see docs/orchestration.md).
from csparql.orchestration.dags import stream_ingestion_dags
from csparql.orchestration.revisions import revision_dags

globals().update(stream_ingestion_dags())
globals().update(revision_dags())
