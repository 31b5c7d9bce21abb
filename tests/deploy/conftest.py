"""What the tests of the deployment layer (``csparql.deploy``) share: settings over an empty registry and a
warehouse in the test's own folder, with two minutes of allowed lateness."""

from __future__ import annotations

import pytest

from csparql.deploy.settings import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    (tmp_path / "registry").mkdir()
    return Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                      "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                      "CSPARQL_ALLOWED_LATENESS": "2m"})
