"""Spark's side of a warehouse in S3: the ``s3a`` file system, configured from the standard AWS variables.

csparql reads and commits Delta logs with delta-rs; Spark only reads and writes the Parquet data files, through
Hadoop's ``s3a`` file system (``hadoop-aws``, matching pyspark's Hadoop, and the AWS SDK v2 bundle it depends
on: ``csparql.runtime.packages``). The ``s3://`` scheme the tables' files are named by is mapped to ``s3a`` too.

- ``spark_s3_settings()``: what a Spark application (a local session, a Connect server, spark-submit) needs at
  start: the package and the ``spark.hadoop.fs.s3a.*`` settings. Executors on other machines get the endpoint
  and the credentials through these settings, not through their own environment.
- ``configure_session(session)``: the same Hadoop settings applied to a session that is already running (a
  Spark Connect client's, or one started before the warehouse was known); it must have ``hadoop-aws``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from csparql.storage.aws_variables import S3Settings, s3_settings
from csparql.runtime.packages import HADOOP_AWS

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
SIMPLE_CREDENTIALS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_CREDENTIALS = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
PACKAGES_VARIABLE = "CSPARQL_SPARK_PACKAGES"
"""Extra Maven coordinates (comma-separated) for the sessions csparql starts, beside the ones it adds itself."""

_configured: set[str] = set()
_lock = threading.Lock()


def hadoop_s3_settings(settings: S3Settings | None = None) -> dict[str, str]:
    """The Hadoop settings (``fs.s3a.*``) that reach the store the AWS variables name: endpoint with path-style
    access for an S3-compatible server, region, and the credentials when given (else Hadoop's default chain:
    environment, profile, instance role)."""
    settings = settings or s3_settings()
    hadoop = {"fs.s3.impl": S3A, "fs.s3a.impl": S3A}
    if settings.endpoint:
        hadoop["fs.s3a.endpoint"] = settings.endpoint
        hadoop["fs.s3a.path.style.access"] = "true"
        hadoop["fs.s3a.connection.ssl.enabled"] = "false" if settings.insecure else "true"
    hadoop["fs.s3a.endpoint.region"] = settings.region or "us-east-1"
    if settings.access_key and settings.secret_key:
        hadoop["fs.s3a.access.key"] = settings.access_key
        hadoop["fs.s3a.secret.key"] = settings.secret_key
        if settings.session_token:
            hadoop["fs.s3a.session.token"] = settings.session_token
            hadoop["fs.s3a.aws.credentials.provider"] = TEMPORARY_CREDENTIALS
        else:
            hadoop["fs.s3a.aws.credentials.provider"] = SIMPLE_CREDENTIALS
    # Uploads buffer in memory: s3a's disk buffers go through Hadoop's checksummed local file system, which
    # the sessions replace by the raw one (no .crc files in table folders).
    hadoop["fs.s3a.fast.upload.buffer"] = "bytebuffer"
    hadoop["fs.s3a.attempts.maximum"] = "5"
    hadoop["fs.s3a.retry.limit"] = "3"
    return hadoop


def packages(extra: str | None = None) -> str:
    """``spark.jars.packages`` for a session that reaches S3: ``hadoop-aws`` and the user's
    ``CSPARQL_SPARK_PACKAGES``."""
    wanted = [HADOOP_AWS, *(p.strip() for p in (extra if extra is not None else
                                                 os.environ.get(PACKAGES_VARIABLE, "")).split(",") if p.strip())]
    return ",".join(dict.fromkeys(wanted))


def spark_s3_settings(settings: S3Settings | None = None) -> dict[str, str]:
    """The Spark settings of an application that reads and writes a warehouse in S3 (``spark.jars.packages``
    and ``spark.hadoop.fs.s3a.*``)."""
    settings = settings or s3_settings()
    spark = {"spark.jars.packages": packages(),
             **{f"spark.hadoop.{key}": value for key, value in hadoop_s3_settings(settings).items()}}
    # Python code in executors (an ingest's parsers writing their rejects) reaches S3 through pyarrow, which
    # reads the AWS variables: give them to executors that do not share the driver's environment.
    for variable, value in aws_variables(settings).items():
        spark[f"spark.executorEnv.{variable}"] = value
    return spark


def aws_variables(settings: S3Settings) -> dict[str, str]:
    """The standard AWS variables that give ``settings``."""
    named = {"AWS_ENDPOINT_URL": settings.endpoint, "AWS_ACCESS_KEY_ID": settings.access_key,
             "AWS_SECRET_ACCESS_KEY": settings.secret_key, "AWS_SESSION_TOKEN": settings.session_token,
             "AWS_REGION": settings.region}
    return {name: value for name, value in named.items() if value}


def configure_session(session, settings: Mapping[str, str] | None = None) -> None:
    """Apply ``hadoop_s3_settings`` to a running session, once per session: to the JVM's Hadoop configuration
    for a classic session, as session settings (which Spark passes to the file systems it opens) for a Spark
    Connect client."""
    key = getattr(session, "session_id", None) or str(id(session))
    with _lock:
        if key in _configured:
            return
        hadoop = dict(settings or hadoop_s3_settings())
        if type(session).__module__.startswith("pyspark.sql.connect"):
            for name, value in hadoop.items():
                session.conf.set(name, value)
        else:
            configuration = session.sparkContext._jsc.hadoopConfiguration()
            for name, value in hadoop.items():
                configuration.set(name, value)
        _configured.add(key)
