"""A command that starts a local Spark prints nothing of the JVM's start: Spark 4's launcher adds the
incubating vector module to every JVM, which then warns ``WARNING: Using incubator modules`` on standard
error. The session is started in a new process, as a ``csparql`` command starts it; what the JVM writes
later to its standard error still reaches the terminal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestration.spark_cluster import spark_environment

pytestmark = pytest.mark.spark

_START = """
import sys, time
from csparql.runtime.session import spark_session

spark = spark_session("local[1]")
print("COUNT", spark.range(3).count(), flush=True)
print("python speaks", file=sys.stderr, flush=True)
spark.sparkContext._jvm.java.lang.System.err.println("the JVM speaks")
spark.stop()
time.sleep(0.5)
"""


def test_starting_a_local_spark_prints_no_incubator_warning_and_keeps_the_jvm_s_other_output(tmp_path):
    env = spark_environment(tmp_path)
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, "-c", _START], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "COUNT 3" in done.stdout, done.stderr[-3000:]
    assert "incubator" not in done.stderr
    assert "python speaks" in done.stderr and "the JVM speaks" in done.stderr
