"""The deployment plan of registered queries, without Airflow: names, settings, and what a window waits for."""

from __future__ import annotations

import pytest

from csparql.deployment import RegistrationError, Settings, deployment_of, registry_name

MINUTE = 60_000_000
T0 = 1_269_244_800_000_000  # 2010-03-22T08:00:00Z
PRODUCER = """REGISTER STREAM Busy COMPUTED EVERY 5m AS
CONSTRUCT { ?s <http://example.org/busy> true }
FROM STREAM <http://example.org/in> [RANGE 10m STEP 5m]
WHERE { ?s <http://example.org/p> ?o }
"""
CONSUMER = """REGISTER QUERY Reader AS
SELECT ?s FROM STREAM <urn:csparql:stream:Busy> [RANGE 15m STEP 15m]
FROM STREAM <http://example.org/other> [RANGE 15m STEP 15m]
WHERE { ?s ?p ?o }
"""


@pytest.fixture
def settings(tmp_path):
    (tmp_path / "queries").mkdir()
    return Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "queries"),
                                      "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                      "CSPARQL_ALLOWED_LATENESS": "2m"})


def test_a_window_waits_for_the_ingested_streams_watermark_and_for_every_producer_window_inside_it(settings):
    (settings.registry / "busy.rq").write_text(PRODUCER)
    (settings.registry / "reader.rq").write_text(CONSUMER)
    reader = deployment_of(settings.registry / "reader.rq", settings)
    needs = reader.requirements(T0 + 30 * MINUTE)
    assert needs.window_end == T0 + 30 * MINUTE
    assert needs.streams == {"http://example.org/other": T0 + 32 * MINUTE}  # window end + allowed lateness
    assert needs.producer_windows == {"busy": [T0 + 20 * MINUTE, T0 + 25 * MINUTE, T0 + 30 * MINUTE]}


def test_settings_refuse_unusable_values_naming_the_variable():
    with pytest.raises(ValueError, match="CSPARQL_SPARK='yarn'"):
        Settings.from_environment({"CSPARQL_SPARK": "yarn"})
    with pytest.raises(ValueError, match="CSPARQL_WAIT_TIMEOUT='soon'"):
        Settings.from_environment({"CSPARQL_WAIT_TIMEOUT": "soon"})


def test_registry_names_must_be_dag_ids_and_table_names(settings):
    with pytest.raises(RegistrationError, match="'02-cars' cannot name a registered query"):
        registry_name(settings.registry / "02-cars.rq")


def test_a_query_reading_its_own_output_is_refused(settings):
    (settings.registry / "loop.rq").write_text(PRODUCER.replace("<http://example.org/in>", "<urn:csparql:stream:Busy>"))
    with pytest.raises(RegistrationError, match="reads the stream it produces"):
        deployment_of(settings.registry / "loop.rq", settings)
