"""One result table per query text: ``csparql run``, ``replay`` and ``register`` refuse, in one line, a query text
that would write into a result table holding another text's results, while the same query laid out otherwise and
an edit of a registered query saved through the registry keep writing into their table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from csparql.cli import main
from csparql.deploy.plan import deployment_of
from csparql.deploy.settings import Settings
from csparql.engine.runner import Engine
from csparql.jobs.evaluation import evaluate_deployment_window
from csparql.storage import delta
from csparql.storage.results import ResultTable
from csparql.core.windows import parse_instant
from support import SPEC_QUERIES

PER_DISTRICT = SPEC_QUERIES / "04-cars-per-district.rq"
BY_CAR = SPEC_QUERIES / "17-engine-design-example.rq"
NAME = "CarsEnteringCityCenterPerDistrict"
TOLLGATES = "http://streams.org/citytollgates.trdf"
AT = "2010-03-22T09:00:00Z"


@pytest.fixture
def warehouse(spark, tmp_path, monkeypatch):
    """A warehouse with an hour of the sample citytollgates stream and the city graph, and a registry; the
    command line's settings name both."""
    from csparql.samples import write_samples

    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("CSPARQL_REGISTRY", str(tmp_path / "dags" / "queries"))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(warehouse))
    samples = write_samples(tmp_path / "samples", hours=1)
    assert main(["ingest", "--warehouse", str(warehouse), "--stream", TOLLGATES, str(samples.streams[TOLLGATES])]) == 0
    assert main(["load-static", "--warehouse", str(warehouse), str(samples.graphs[None])]) == 0
    return warehouse


def stored_columns(warehouse) -> list[str]:
    table = ResultTable.find(Settings.from_environment().warehouse, NAME)
    return pa.schema(delta.open_table(table.path).schema().to_arrow()).names


def test_another_text_under_the_same_name_is_refused_and_an_edit_keeps_its_table(warehouse, tmp_path, capsys):
    assert main(["run", str(PER_DISTRICT), "--at", AT, "--warehouse", str(warehouse)]) == 0
    columns = stored_columns(warehouse)
    capsys.readouterr()

    # 17 computes (district, car): under 04's name it must not add its rows nor its columns to 04's table
    for command in (["run", str(BY_CAR), "--at", AT], ["replay", str(BY_CAR), "--from", AT, "--to", AT]):
        assert main([*command, "--name", NAME, "--warehouse", str(warehouse)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "the result table carsenteringcitycenterperdistrict already holds the results of another query text" in err
        assert "under another name" in err
    assert stored_columns(warehouse) == columns
    assert main(["register", str(BY_CAR), "--as", NAME, "--warehouse", str(warehouse)]) == 1
    assert "already holds the results of another query text" in capsys.readouterr().err
    assert not (tmp_path / "dags" / "queries" / f"{NAME}.rq").exists()

    # the same query laid out otherwise, with a comment, is the same query
    relaid = tmp_path / "relaid.rq"
    relaid.write_text("# the same query, laid out otherwise\n" + "\n\n".join(PER_DISTRICT.read_text().splitlines()))
    assert main(["run", str(relaid), "--at", AT, "--warehouse", str(warehouse)]) == 0

    # registered, then edited through the registry: the edit writes into the same table, by its DAG and the CLI
    assert main(["register", str(PER_DISTRICT), "--warehouse", str(warehouse)]) == 0
    edited = tmp_path / "edited.rq"
    edited.write_text(PER_DISTRICT.read_text().replace("[RANGE 30m STEP 5m]", "[RANGE 20m STEP 5m]"))
    assert main(["register", str(edited), "--replace", "--warehouse", str(warehouse)]) == 0
    settings = Settings.from_environment()
    deployment = deployment_of(settings.registry / f"{NAME}.rq", settings)
    engine = Engine(settings.warehouse)
    window = evaluate_deployment_window(engine, deployment, settings, parse_instant("2010-03-22T08:55:00Z"), None)
    assert window.evaluation.rows_written > 0
    assert main(["run", str(edited), "--at", AT, "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()
    # 17 is still refused: it is no version of the registered query
    assert main(["run", str(BY_CAR), "--at", AT, "--name", NAME, "--warehouse", str(warehouse)]) == 1
    assert "another query text" in capsys.readouterr().err
