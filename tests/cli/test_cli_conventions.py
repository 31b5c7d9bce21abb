"""What a first run meets on the command line: ``--version``; ``register --warehouse`` honoured and the paused
DAG said; ``streams`` printing each stream's landing folder; ``samples`` writing the files the README ingests;
``results`` and ``replay`` in CSV and TSV as one table a CSV reader loads whole; ``run.sh`` saying what it runs."""

from __future__ import annotations

import csv
import io
from importlib.metadata import version

import pytest

from csparql.cli import main
from csparql.deploy.settings import Settings
from csparql.storage.warehouse import slug
from support import ROOT, SPEC_QUERIES

CARS_PER_DISTRICT = SPEC_QUERIES / "04-cars-per-district.rq"
TOLLGATES = "http://streams.org/citytollgates.trdf"


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("CSPARQL_REGISTRY", str(tmp_path / "dags" / "queries"))
    monkeypatch.setenv("CSPARQL_WAREHOUSE", str(tmp_path / "default-warehouse"))
    monkeypatch.delenv("CSPARQL_LANDING", raising=False)
    return tmp_path / "dags" / "queries"


def test_version_prints_the_installed_distributions_version(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out == f"csparql {version('csparql')}\n"


def test_register_uses_the_warehouse_it_is_given_and_says_the_dag_starts_paused(registry, tmp_path, capsys):
    warehouse = tmp_path / "given-warehouse"
    assert main(["register", str(CARS_PER_DISTRICT), "--warehouse", str(warehouse)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("registered CarsEnteringCityCenterPerDistrict: ")
    assert "starts paused" in out and "`airflow dags unpause CarsEnteringCityCenterPerDistrict`" in out
    assert (registry / "CarsEnteringCityCenterPerDistrict.rq").exists()
    assert (warehouse / "_csparql" / "query_facts").is_dir()  # what registering stores went to that warehouse
    assert not (tmp_path / "default-warehouse").exists()
    assert main(["unregister", "CarsEnteringCityCenterPerDistrict", "--warehouse", str(warehouse)]) == 0


def test_streams_prints_the_landing_folder_of_every_stream_a_registered_query_reads(registry, tmp_path, capsys):
    warehouse = tmp_path / "warehouse"
    assert main(["register", str(CARS_PER_DISTRICT), "--warehouse", str(warehouse)]) == 0
    capsys.readouterr()
    assert main(["streams", "--warehouse", str(warehouse)]) == 0
    lines = capsys.readouterr().out.splitlines()
    folder = warehouse.resolve() / "landing" / slug(TOLLGATES)
    assert lines[0] == "stream\ttable\tlanding folder\twatermark\ttriples"
    assert lines[1].split("\t") == [f"<{TOLLGATES}>", f"{warehouse.resolve() / 'streams' / slug(TOLLGATES)} "
                                    "(nothing landed yet)", str(folder), "-", "-"]
    assert main(["streams", "--landing", TOLLGATES, "--warehouse", str(warehouse)]) == 0
    assert capsys.readouterr().out == f"{folder}\n"
    settings = Settings.from_environment({"CSPARQL_WAREHOUSE": str(warehouse)})
    assert settings.landing_folder(TOLLGATES) == folder  # where the ingestion DAG looks


def test_samples_writes_the_files_the_readme_ingests(tmp_path, capsys):
    assert main(["samples", str(tmp_path / "samples"), "--hours", "1"]) == 0
    out = capsys.readouterr().out
    stream, graph = tmp_path / "samples" / "citytollgates.tnq", tmp_path / "samples" / "city.ttl"
    assert stream.stat().st_size > 0 and graph.stat().st_size > 0
    assert f"{stream}\tcsparql ingest --stream {TOLLGATES} {stream}\n" in out
    assert f"{graph}\tcsparql load-static {graph}\n" in out
    (tmp_path / "file").write_text("")
    assert main(["samples", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err == f"csparql samples: {tmp_path / 'file'} is a file, not a folder\n"


def test_run_sh_says_it_runs_the_stack_on_spark_connect():
    comment = "".join(line for line in (ROOT / "run.sh").read_text(encoding="utf-8").splitlines(keepends=True)
                      if line.startswith("# "))
    assert "local Spark" not in comment and "Spark Connect server" in comment


@pytest.fixture(scope="module")
def hour_of_tollgates(spark, tmp_path_factory):
    """A warehouse with an hour of the sample citytollgates stream and the city graph."""
    from csparql.samples import write_samples

    root = tmp_path_factory.mktemp("formats")
    warehouse = root / "warehouse"
    samples = write_samples(root / "samples", hours=1)
    assert main(["ingest", "--warehouse", str(warehouse), "--stream", TOLLGATES, str(samples.streams[TOLLGATES])]) == 0
    assert main(["load-static", "--warehouse", str(warehouse), str(samples.graphs[None])]) == 0
    return warehouse


def read_table(text: str, fmt: str) -> list[list[str]]:
    """The output as a CSV reader reads it (no comment lines: a reader would take them for rows)."""
    assert not any(line.startswith("#") for line in text.splitlines())
    return list(csv.reader(io.StringIO(text), delimiter="," if fmt == "csv" else "\t"))


def test_replay_and_results_print_one_table_with_the_window_as_columns(hour_of_tollgates, capsys):
    warehouse = str(hour_of_tollgates)
    windows = {("2010-03-22T08:20:00Z", "2010-03-22T08:50:00Z"), ("2010-03-22T08:25:00Z", "2010-03-22T08:55:00Z"),
               ("2010-03-22T08:30:00Z", "2010-03-22T09:00:00Z")}
    header = ["window_start", "window_end", "district", "passages"]
    capsys.readouterr()
    assert main(["replay", str(CARS_PER_DISTRICT), "--from", "2010-03-22T08:50:00Z", "--to", "2010-03-22T09:00:00Z",
                 "--warehouse", warehouse, "--format", "csv"]) == 0
    replayed = read_table(capsys.readouterr().out, "csv")
    assert replayed[0] == header  # one header for every window
    assert {(row[0], row[1]) for row in replayed[1:]} == windows and all(len(row) == 4 for row in replayed)
    for fmt in ("csv", "tsv"):
        assert main(["results", "CarsEnteringCityCenterPerDistrict", "--warehouse", warehouse, "--format", fmt]) == 0
        stored = read_table(capsys.readouterr().out, fmt)
        assert stored[0] == header
        assert {(row[0], row[1]) for row in stored[1:]} == windows and all(len(row) == 4 for row in stored)
        if fmt == "csv":
            assert sorted(map(tuple, stored[1:])) == sorted(map(tuple, replayed[1:]))
    assert main(["replay", str(CARS_PER_DISTRICT), "--from", "2010-03-22T09:00:00Z", "--to", "2010-03-22T09:00:00Z",
                 "--warehouse", warehouse, "--format", "tsv"]) == 0
    one = read_table(capsys.readouterr().out, "tsv")
    assert one[0] == header and {(row[0], row[1]) for row in one[1:]} == {("2010-03-22T08:30:00Z", "2010-03-22T09:00:00Z")}


def test_a_table_of_windows_holds_graphs_and_refuses_a_window_with_other_columns():
    from rdflib import Literal, URIRef, Variable

    from csparql.storage.results import QueryResult
    from csparql.storage.formats import ColumnsDiffer, WindowedTable

    graph = WindowedTable("tsv")
    triple = (URIRef("http://ex/s"), URIRef("http://ex/p"), Literal("a\tb"))
    text = graph.rows(None, "2010-03-22T09:00:00Z", QueryResult("construct", triples=[triple]))
    assert text == ('window_start\twindow_end\tsubject\tpredicate\tobject\n'
                    '\t2010-03-22T09:00:00Z\t<http://ex/s>\t<http://ex/p>\t"a\\tb"\n')
    table = WindowedTable("csv")
    first = QueryResult("select", (Variable("x"),), rows=[(Literal('say "hi", twice'),)])
    assert table.rows("2010-03-22T08:00:00Z", "2010-03-22T09:00:00Z", first) == (
        'window_start,window_end,x\r\n2010-03-22T08:00:00Z,2010-03-22T09:00:00Z,"say ""hi"", twice"\r\n')
    with pytest.raises(ColumnsDiffer, match="the window ending 2010-03-22T10:00:00Z has the columns y, not the "
                       "earlier windows' x"):
        table.rows("2010-03-22T09:00:00Z", "2010-03-22T10:00:00Z", QueryResult("select", (Variable("y"),), rows=[]))
