"""What building the DAGs of a registry costs in reads of its files: the DAG factory looks at the registry once
for all its DAGs, whatever the number of queries (no Airflow stack: the DAGs are built in this process)."""

from __future__ import annotations

import io
import builtins
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.capacity import query_text
from csparql.deploy import registry as registry_module
from csparql.deploy.settings import Settings

pytestmark = pytest.mark.airflow

QUERIES = 18
"""Three rounds of the capacity benchmark's mix of queries (``benchmarks/capacity.py``)."""


def test_the_factory_reads_each_registry_file_once_however_many_dags_it_builds(tmp_path, monkeypatch):
    from csparql.orchestration.factory import csparql_dags

    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    settings.registry.mkdir()
    names = []
    for index in range(QUERIES):
        name, text = query_text(index, "1m")
        (settings.registry / f"{name}.rq").write_text(text, encoding="utf-8")
        names.append(name)
    for cache in ("_READ", "_FACTS", "_COMPILED"):
        monkeypatch.setattr(registry_module, cache, {}, raising=False)  # a fresh DAG processor's process
    # The files were written milliseconds ago; a file changed less than RECENT_CHANGE_NS before it was read is
    # read again at the next look (the revision DAGs take one of their own): count them as settled.
    monkeypatch.setattr(registry_module, "RECENT_CHANGE_NS", 0, raising=False)

    reads: Counter = Counter()
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).parent == settings.registry and str(file).endswith(".rq"):
            reads[Path(file).stem] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    dags = csparql_dags(settings=settings)
    monkeypatch.undo()

    assert reads == Counter({name: 1 for name in names})  # not once per DAG built
    assert {dag_id for dag_id in dags if not dag_id.startswith(("ingest_", "revise_"))} == set(names)
    assert {dag_id for dag_id in dags if dag_id.startswith("revise_")} == {f"revise_{name}" for name in names}
    assert [dag_id for dag_id in dags if dag_id.startswith("ingest_")] == ["ingest_streams_org_milantollgates_trdf_23f7017a"]
