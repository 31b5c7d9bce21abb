# Airflow DAGs of csparql but the query DAGs, which the registry's loaders build (dags/queries/, one file per query,
# so that one broken query never hides the others): the ingestion DAGs and the revision DAGs (docs/orchestration.md).
from csparql.orchestration.factory import csparql_dags

csparql_dags(queries=False)
