"""The parser is built from the grammar once and then loaded from its cache: every process that parses a query
(each Airflow task, each DAG file the DAG processor parses) would otherwise spend a CPU-second building it."""

from __future__ import annotations

import lark
import pytest

from csparql.core.language import parser

QUERY = "SELECT ?s WHERE { ?s ?p ?o }"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty cache folder and no parser built in this process yet."""
    monkeypatch.setenv("CSPARQL_CACHE_DIR", str(tmp_path / "cache"))
    parser.lark_parser.cache_clear()
    yield tmp_path / "cache"
    parser.lark_parser.cache_clear()


def _built_fresh(monkeypatch) -> list[int]:
    """Count the parsers built from the grammar (rather than loaded)."""
    built = []
    original = lark.Lark.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(lark.Lark, "__init__", counting)
    return built


def test_the_parser_is_built_once_then_loaded(fresh, monkeypatch):
    built = _built_fresh(monkeypatch)
    parser.parse(QUERY)
    assert len(built) == 1 and len(list(fresh.glob("*.lark"))) == 1
    parser.lark_parser.cache_clear()  # as in a new process
    parser.parse(QUERY)
    assert len(built) == 1, "the second process built the parser again instead of loading it"


def test_a_damaged_cache_is_built_again_and_replaced(fresh, monkeypatch):
    parser.parse(QUERY)
    (cached,) = fresh.glob("*.lark")
    cached.write_bytes(cached.read_bytes()[:100])
    parser.lark_parser.cache_clear()
    built = _built_fresh(monkeypatch)
    assert parser.parse(QUERY).form is not None
    assert len(built) == 1
    parser.lark_parser.cache_clear()
    parser.parse(QUERY)
    assert len(built) == 1, "the damaged file was not replaced by a whole one"
    assert not list(fresh.glob("*.tmp"))


def test_without_a_writable_cache_folder_the_parser_is_built(fresh, monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("CSPARQL_CACHE_DIR", str(blocker / "cache"))
    built = _built_fresh(monkeypatch)
    assert parser.parse(QUERY).form is not None
    assert len(built) == 1
