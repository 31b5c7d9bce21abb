# Every registered C-SPARQL query as an Airflow DAG, and an ingestion DAG per stream the queries read: the one
# line csparql needs in a DAGs folder (Airflow's DAG processor parses a file only when it mentions airflow and dag).
from csparql.orchestration.factory import csparql_dags; globals().update(csparql_dags())  # Airflow DAGs
