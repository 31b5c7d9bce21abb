"""Looking at the registry once per request or parse: each registry file is read once however many of its
queries are deployed, a file unchanged since this process read it is not read again, and a change, a new
file or a removed one is noticed at once."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
from collections import Counter
from pathlib import Path

import pytest

from csparql.deploy import registry as registry_module
from csparql.deploy.plan import deployment_of, ingested_streams
from csparql.deploy.registry import RegistrationError, registry_facts, registry_files

PRODUCER = """REGISTER STREAM Busy{i} COMPUTED EVERY 5m AS
CONSTRUCT {{ ?s <http://example.org/busy> true }}
FROM STREAM <http://example.org/in{i}> [RANGE 10m STEP 5m]
WHERE {{ ?s <http://example.org/p> ?o }}
"""
CONSUMER = """REGISTER QUERY Reader{i} COMPUTED EVERY 15m AS
SELECT ?s FROM STREAM <urn:csparql:stream:Busy{producer}> [RANGE 15m STEP 15m]
WHERE {{ ?s ?p ?o }}
"""
QUERIES = 12


def write_registry(registry: Path, count: int) -> list[Path]:
    """``count`` registry files: ``q00`` produces the stream ``Busy0``, ``q01`` reads it, and so on."""
    paths = []
    for i in range(count):
        path = registry / f"q{i:02d}.rq"
        path.write_text(PRODUCER.format(i=i) if i % 2 == 0 else CONSUMER.format(i=i, producer=i - 1))
        paths.append(path)
    return paths


@contextlib.contextmanager
def counting_reads(folder: Path):
    """Counts, per file name, the opens of the ``.rq`` files of ``folder`` (``open``, ``io.open`` and so
    ``Path.read_text`` and ``Path.read_bytes``)."""
    reads: Counter = Counter()
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).suffix == ".rq" and Path(file).parent == folder:
            reads[Path(file).name] += 1
        return real_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as monkey:
        monkey.setattr(builtins, "open", counting_open)
        monkey.setattr(io, "open", counting_open)
        yield reads


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as if it had never looked at a registry."""
    for cache in ("_READ", "_FACTS", "_COMPILED"):
        monkeypatch.setattr(registry_module, cache, {}, raising=False)


@pytest.fixture
def settled(monkeypatch):
    """The registry files the test writes count as settled at once: a file changed less than
    ``RECENT_CHANGE_NS`` before it is read is read again next time (tested on its own below), and the test's
    files are only milliseconds old."""
    monkeypatch.setattr(registry_module, "RECENT_CHANGE_NS", 0, raising=False)


def deploy_all(settings) -> dict[str, object]:
    """What a DAG file of the registry and the ingestion DAGs' file ask of it: every query's deployment, one
    after the other (an error's message for one that cannot be deployed), and the streams to ingest."""
    deployments: dict[str, object] = {}
    for path in registry_files(settings):
        try:
            deployments[path.stem] = deployment_of(path, settings)
        except RegistrationError as error:
            deployments[path.stem] = error.message
    deployments["ingested"] = ingested_streams(settings)
    return deployments


def test_deploying_every_query_of_a_registry_reads_each_file_once(settings, fresh_process, settled):
    paths = write_registry(settings.registry, QUERIES)
    with counting_reads(settings.registry) as reads:
        deployments = deploy_all(settings)
    assert reads == Counter({path.name: 1 for path in paths})  # not once per query that deploys
    assert deployments["q01"].inputs[0].producer == "q00"
    assert deployments["ingested"] == sorted(f"http://example.org/in{i}" for i in range(0, QUERIES, 2))


def test_an_unchanged_registry_looked_at_again_reads_no_file(settings, fresh_process, settled):
    write_registry(settings.registry, QUERIES)
    first = deploy_all(settings)
    with counting_reads(settings.registry) as reads:
        again = deploy_all(settings)
        facts = registry_facts(settings)
    assert reads == Counter()
    assert again == first
    assert [path.name for path, _ in facts] == [f"q{i:02d}.rq" for i in range(QUERIES)]


def test_a_changed_an_added_and_a_removed_file_are_noticed_and_only_the_changed_one_is_read(
        settings, fresh_process, settled):
    paths = write_registry(settings.registry, QUERIES)
    assert deploy_all(settings)["q03"].inputs[0].producer == "q02"

    # q02 now registers another stream, written in place: q03's stream has no producer any more
    paths[2].write_text(PRODUCER.format(i=2).replace("Busy2", "Elsewhere"))
    with counting_reads(settings.registry) as reads:
        changed = deploy_all(settings)
    assert reads == Counter({"q02.rq": 1})
    assert changed["q03"].inputs[0].producer is None
    assert "urn:csparql:stream:Busy2" in changed["ingested"]

    # a new file produces it again
    added = settings.registry / "q99.rq"
    added.write_text(PRODUCER.format(i=2))
    with counting_reads(settings.registry) as reads:
        deployments = deploy_all(settings)
    assert reads == Counter({"q99.rq": 1})
    assert deployments["q03"].inputs[0].producer == "q99"
    assert "urn:csparql:stream:Busy2" not in deployments["ingested"]

    # and when that file is removed, it is gone from every deployment, and from this process's memory
    added.unlink()
    with counting_reads(settings.registry) as reads:
        deployments = deploy_all(settings)
    assert reads == Counter()
    assert "q99" not in deployments and deployments["q03"].inputs[0].producer is None
    assert all(key.name != "q99.rq" for key in registry_module._READ)


def test_a_same_size_rewrite_that_keeps_the_modification_time_is_noticed(settings, fresh_process, settled):
    # as `cp -p` or `touch -d` leave a file: same inode, same size, the old modification time; the kernel
    # still sets its status-change time
    (path,) = write_registry(settings.registry, 1)
    before = os.stat(path)
    assert deployment_of(path, settings).registered_as == "Busy0"
    path.write_text(PRODUCER.format(i=7).replace("in7", "in0"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_ino == before.st_ino
    assert deployment_of(path, settings).registered_as == "Busy7"


def test_a_file_changed_moments_ago_is_read_again_each_time(settings, fresh_process):
    # a second write within the same tick of the filesystem's clock could keep size and times: a file
    # changed less than RECENT_CHANGE_NS ago is not trusted to be as it was read
    (path,) = write_registry(settings.registry, 1)
    with counting_reads(settings.registry) as reads:
        for _ in range(3):
            deployment_of(path, settings)
    assert reads == Counter({"q00.rq": 3})


def test_a_file_that_cannot_be_read_any_more_is_reported_and_forgotten(settings, fresh_process, settled):
    paths = write_registry(settings.registry, 2)
    assert deploy_all(settings)["q01"].inputs[0].producer == "q00"
    paths[0].write_bytes(b"\xff\xfe not UTF-8")
    deployments = deploy_all(settings)
    assert "q00.rq: cannot be read" in str(pytest.raises(RegistrationError, deployment_of, paths[0], settings).value)
    assert "cannot be read" in deployments["q00"]
    assert deployments["q01"].inputs[0].producer is None


def test_deployments_from_one_snapshot_are_those_deployed_one_by_one_in_fresh_processes(settings, monkeypatch):
    from csparql.deploy.registry import registry_snapshot

    write_registry(settings.registry, QUERIES)
    (settings.registry / "broken.rq").write_text("REGISTER QUERY Broken AS SELECT WHERE")
    (settings.registry / "q00_again.rq").write_text(PRODUCER.format(i=0))  # a second producer of Busy0

    def deployed(path, registry=None):
        try:
            return deployment_of(path, settings, registry) if registry else deployment_of(path, settings)
        except RegistrationError as error:
            return str(error)

    one_by_one = {}
    for path in registry_files(settings):
        for cache in ("_READ", "_FACTS", "_COMPILED"):
            monkeypatch.setattr(registry_module, cache, {})
        one_by_one[path.name] = deployed(path)
    snapshot = registry_snapshot(settings)
    assert {path.name: deployed(path, snapshot) for path in snapshot.files} == one_by_one
    assert "already produced by q00.rq" in one_by_one["q00_again.rq"]
    assert "broken.rq:1:" in one_by_one["broken.rq"]


def test_a_registration_touches_the_dag_files_whose_dags_it_changes_and_no_other(tmp_path):
    # Airflow's DAG processor parses a DAG file modified since its last parse at once; the others wait for
    # their min_file_process_interval (docs/orchestration.md)
    from csparql.deploy.registration import register_text, unregister
    from csparql.deploy.registry import sync_loaders
    from csparql.deploy.settings import Settings

    dags = tmp_path / "dags"
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(dags / "queries"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    dags.mkdir()
    (dags / "csparql_streams.py").write_text("from csparql.orchestration.factory import csparql_dags\n\n"
                                             "csparql_dags(queries=False)\n")
    (dags / "unrelated.py").write_text("# another DAG file of the user\n")
    register_text(PRODUCER.format(i=0), settings, name="producer")
    register_text(CONSUMER.format(i=1, producer=0), settings, name="consumer")
    register_text(PRODUCER.format(i=2), settings, name="other")
    files = {path.stem: path for path in [*dags.glob("*.py"), *settings.registry.glob("*.py")]}
    long_ago = os.stat(files["producer"]).st_mtime_ns - 3600 * 10**9

    def touched_by(change) -> set[str]:
        for path in [*files.values(), *settings.registry.glob("*.rq")]:  # as parsed long ago
            if path.exists():
                os.utime(path, ns=(long_ago, long_ago))
        change()
        return {name for name, path in files.items() if path.exists() and os.stat(path).st_mtime_ns > long_ago}

    comment = "# the same query, commented\n" + PRODUCER.format(i=0)
    assert touched_by(lambda: register_text(comment, settings, name="producer", replace=True)) == {"producer"}
    renamed = PRODUCER.format(i=0).replace("Busy0", "Renamed")
    assert touched_by(lambda: register_text(renamed, settings, name="producer", replace=True)) == {
        "producer", "consumer", "csparql_streams"}  # its consumer lost its producer; a stream to ingest more
    assert touched_by(lambda: register_text(PRODUCER.format(i=0), settings, name="producer", replace=True)) == {
        "producer", "consumer", "csparql_streams"}
    assert touched_by(lambda: unregister("producer", settings)) == {"consumer", "csparql_streams"}
    assert touched_by(lambda: register_text(PRODUCER.format(i=0), settings, name="producer")) == {
        "producer", "consumer", "csparql_streams"}
    assert touched_by(lambda: sync_loaders(settings)) == set()  # nothing changed by hand

    def edit_by_hand():
        edited = settings.registry / "other.rq"
        edited.write_text(PRODUCER.format(i=3))
        os.utime(edited, ns=(long_ago + 10**9, long_ago + 10**9))  # newer than its loader
        sync_loaders(settings)

    assert touched_by(edit_by_hand) == {"producer", "consumer", "other", "csparql_streams"}  # all parsed again
