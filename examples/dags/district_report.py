"""An Airflow DAG of one's own around csparql's operators: every morning, land the files dropped for the tollgates
stream, evaluate the per-district count's window closing at the run's logical date, then hand the window to a
task of the user's own (here it only logs what the evaluation wrote).

The query is a registered query's name or a .rq file; ``conn_id`` names the Airflow connection of Spark (type
``spark_connect`` for a Spark Connect server, ``spark`` for spark-submit to a cluster; without it, the
``[csparql] spark`` setting decides)."""

import pendulum
from airflow.sdk import DAG, task

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator, CsparqlIngestOperator

TOLLGATES = "http://streams.org/citytollgates.trdf"

with DAG("district_report", schedule="0 6 * * *", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    land = CsparqlIngestOperator(task_id="land_tollgates", stream=TOLLGATES)
    evaluate = CsparqlEvaluateWindowOperator(task_id="count_per_district", query="CarsEnteringCityCenterPerDistrict")

    @task
    def report(window: dict) -> None:
        print(f"window ending {window['window_end']}: {window['rows_written']} row(s) written")

    land >> evaluate
    report(evaluate.output)
