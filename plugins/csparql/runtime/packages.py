"""The JVM packages csparql asks Spark for, as Maven coordinates (``spark.jars.packages``).

Spark resolves them from Maven Central on first use and keeps them in its Ivy cache (``~/.ivy2.5.2``, or
``spark.jars.ivy``); later sessions start from the cache without reaching the network.
"""

from __future__ import annotations

HADOOP_VERSION = "3.5.0"
"""The Hadoop pyspark's wheel is built with: hadoop-aws must match it exactly."""

HADOOP_AWS = f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}"
"""The ``s3a://`` file system, with the AWS SDK v2 bundle it depends on (about 690 MB on first download)."""

DELTA_SPARK = "io.delta:delta-spark_4.2_2.13:4.4.0"
"""Delta Lake's Spark connector for Spark 4.2 (not needed by csparql itself: it reads and commits Delta logs
through delta-rs; used to show that its tables are standard Delta, and by users whose Spark has Delta)."""
