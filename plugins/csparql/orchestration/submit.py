"""spark-submit of the window-evaluation job (``csparql.jobs.evaluate_window``), keeping what it reports."""

from __future__ import annotations

import json

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from csparql.jobs.evaluate_window import RESULT_PREFIX


class EvaluationSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that also keeps the job's ``CSPARQL_RESULT`` line (``record``: its evaluation, the
    stale windows it found included) from the driver's output it logs (client deploy mode)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.record: dict | None = None

    def _process_spark_submit_log(self, itr) -> None:  # the hook reads the driver's output only here
        def kept(lines):
            for line in lines:
                text = line.decode() if isinstance(line, bytes) else str(line)
                if text.startswith(RESULT_PREFIX):
                    self.record = json.loads(text[len(RESULT_PREFIX):])
                yield line

        super()._process_spark_submit_log(kept(itr))
