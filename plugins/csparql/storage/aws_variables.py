"""S3's endpoint, credentials and region as the standard AWS variables give them, read once for every part of
csparql that reaches S3: pyarrow's file system and delta-rs (``csparql.storage.location``) and Spark's ``s3a``
(``csparql.runtime.object_storage``).

``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``: an S3-compatible server such as MinIO or SeaweedFS),
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``). ``CSPARQL_OBJECT_STORAGE=s3`` says a process works with S3 (csparql sets it once the
process names an S3 location), so that the Spark sessions it starts, and the Spark processes it launches, reach
S3 too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

OBJECT_STORAGE_VARIABLE = "CSPARQL_OBJECT_STORAGE"
_S3_URI = re.compile(r"s3a?://", re.IGNORECASE)


@dataclass(frozen=True)
class S3Settings:
    """S3's endpoint, credentials and region."""

    endpoint: str | None
    access_key: str | None
    secret_key: str | None
    session_token: str | None
    region: str | None

    @property
    def insecure(self) -> bool:
        """Whether the endpoint is plain HTTP (a server on loopback, typically)."""
        return bool(self.endpoint) and self.endpoint.lower().startswith("http://")


def s3_settings(environment: Mapping[str, str] | None = None) -> S3Settings:
    """The S3 settings of ``environment`` (default: this process's)."""
    env = os.environ if environment is None else environment
    return S3Settings(
        endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
        access_key=env.get("AWS_ACCESS_KEY_ID") or None,
        secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        session_token=env.get("AWS_SESSION_TOKEN") or None,
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
    )


def s3_in_use(environment: Mapping[str, str] | None = None) -> bool:
    """Whether the process works with S3: it named an S3 location, or its ``CSPARQL_WAREHOUSE`` is one."""
    env = os.environ if environment is None else environment
    return env.get(OBJECT_STORAGE_VARIABLE) == "s3" or bool(_S3_URI.match(env.get("CSPARQL_WAREHOUSE", "")))


def mark_s3_in_use() -> None:
    """Record that this process works with S3 (``s3_in_use``), for it and for the processes it starts."""
    os.environ[OBJECT_STORAGE_VARIABLE] = "s3"
