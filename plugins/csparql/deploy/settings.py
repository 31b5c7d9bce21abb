"""The deployment-wide settings, read from the environment, so that the embedded stack, docker-compose and
the tests configure the same code the same way (each variable is documented in docs/orchestration.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from csparql.storage.warehouse import Warehouse, project_root, slug
from csparql.storage.watermarks import MAX_FUTURE_SKEW
from csparql.windows import parse_duration

SPARK_MODES = ("local", "standalone", "connect")
"""Where evaluations run: Spark inside the Airflow task (local), a standalone cluster through spark-submit
(the Airflow connection ``$CSPARQL_SPARK_CONN_ID``, default ``spark_default``), or a Spark Connect server (the
connection ``$CSPARQL_SPARK_CONN_ID``, default ``spark_connect_default``)."""

MAX_FUTURE_SKEW_VARIABLE = "CSPARQL_MAX_FUTURE_SKEW"


@dataclass(frozen=True)
class Settings:
    """Deployment-wide settings, read from the environment (each documented in docs/orchestration.md)."""

    registry: Path
    warehouse: Warehouse
    landing: Path
    spark: str = "local"
    spark_conn_id: str | None = None
    pool: str = "csparql_spark"
    ingest_pool: str = "csparql_ingest"
    allowed_lateness: int = 60_000_000
    wait_timeout: int = 600_000_000
    poll_interval: int = 10_000_000
    max_future_skew: int = MAX_FUTURE_SKEW
    revision_horizon: int = 86_400_000_000
    retries: int = 2

    ENVIRONMENT = {
        "registry": "CSPARQL_REGISTRY",
        "warehouse": "CSPARQL_WAREHOUSE",
        "landing": "CSPARQL_LANDING",
        "spark": "CSPARQL_SPARK",
        "spark_conn_id": "CSPARQL_SPARK_CONN_ID",
        "pool": "CSPARQL_POOL",
        "ingest_pool": "CSPARQL_INGEST_POOL",
        "allowed_lateness": "CSPARQL_ALLOWED_LATENESS",
        "wait_timeout": "CSPARQL_WAIT_TIMEOUT",
        "poll_interval": "CSPARQL_POLL_INTERVAL",
        "max_future_skew": MAX_FUTURE_SKEW_VARIABLE,
        "revision_horizon": "CSPARQL_REVISION_HORIZON",
    }

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        """The settings the environment gives, with defaults for what it does not; ``ValueError`` naming the
        variable for a value that cannot be used."""
        env = os.environ if environ is None else environ
        names = cls.ENVIRONMENT
        warehouse = Warehouse(env[names["warehouse"]]) if env.get(names["warehouse"]) else Warehouse.locate()
        registry = Path(env.get(names["registry"]) or project_root() / "dags" / "queries").resolve()
        landing = Path(env.get(names["landing"]) or warehouse.root / "landing").resolve()
        spark = env.get(names["spark"]) or "local"
        if spark not in SPARK_MODES:
            raise ValueError(f"{names['spark']}={spark!r}: use one of {', '.join(SPARK_MODES)}")

        def duration(key: str, default: int) -> int:
            return duration_setting(names[key], default, env)

        return cls(
            registry=registry,
            warehouse=warehouse,
            landing=landing,
            spark=spark,
            spark_conn_id=env.get(names["spark_conn_id"]) or None,
            pool=env.get(names["pool"]) or cls.pool,
            ingest_pool=env.get(names["ingest_pool"]) or cls.ingest_pool,
            allowed_lateness=duration("allowed_lateness", cls.allowed_lateness),
            wait_timeout=duration("wait_timeout", cls.wait_timeout),
            poll_interval=max(duration("poll_interval", cls.poll_interval), 1_000_000),
            max_future_skew=duration("max_future_skew", cls.max_future_skew),
            revision_horizon=duration("revision_horizon", cls.revision_horizon),
        )

    def landing_folder(self, stream: str) -> Path:
        """Where files for a stream are dropped to be ingested by its ingestion DAG."""
        return self.landing / slug(stream)

    @property
    def connection_id(self) -> str | None:
        """The Airflow connection for the Spark mode (None for local Spark)."""
        if self.spark == "local":
            return None
        return self.spark_conn_id or ("spark_default" if self.spark == "standalone" else "spark_connect_default")


def duration_setting(variable: str, default: int, environ: dict[str, str] | None = None) -> int:
    """The duration (µs) the environment variable ``variable`` gives, ``default`` when it is unset or empty;
    ``ValueError`` naming the variable for a value that is not a duration or is negative."""
    env = os.environ if environ is None else environ
    text = env.get(variable)
    if not text:
        return default
    try:
        value = parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{variable}={text!r}: {error}") from None
    if value < 0:
        raise ValueError(f"{variable}={text!r}: must not be negative")
    return value


def max_future_skew_setting(environ: dict[str, str] | None = None) -> int:
    """``$CSPARQL_MAX_FUTURE_SKEW`` in µs, else ``MAX_FUTURE_SKEW``; ``ValueError`` naming the variable."""
    return duration_setting(MAX_FUTURE_SKEW_VARIABLE, MAX_FUTURE_SKEW, environ)
