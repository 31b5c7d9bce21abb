"""Tests of csparql.stack: the embedded stack (`csparql stack`), its Airflow components, supervision and backfills."""
