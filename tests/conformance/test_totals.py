"""The size of the conformance suite and the honesty of its exclusion list."""

from __future__ import annotations

from collections import Counter

from support import expected_outcome, spec_query_files

from conformance import generator, urban, w3c
from conformance.excluded import EXCLUDED
from conformance.test_generated import SEEDS


def test_at_least_300_queries_are_compared():
    examples = len(urban.example_cases())
    included = len(w3c.included())
    generated = len(SEEDS)
    assert examples == sum(expected_outcome(path) == "ok" for path in spec_query_files())
    assert examples + included + generated >= 300, (examples, included, generated)
    assert generated >= 200


def test_every_exclusion_names_a_test_and_gives_a_reason():
    names = {test.name for test in w3c.load_tests()}
    unknown = sorted(set(EXCLUDED) - names)
    assert not unknown, f"excluded.py lists tests that do not exist: {unknown}"
    for name, reason in EXCLUDED.items():
        assert isinstance(reason, str) and len(reason.strip()) >= 20, f"{name} needs a reason"


def test_every_loaded_test_is_either_run_or_excluded():
    loaded = [test.name for test in w3c.load_tests()]
    run = {test.name for test in w3c.included()}
    assert len(loaded) == len(set(loaded)), "two W3C tests share a name"
    assert all(name in run or name in EXCLUDED for name in loaded)
    assert len(run) + len(EXCLUDED) == len(loaded)


def test_generated_queries_cover_every_category():
    counts = Counter(case.name.split("-", 1)[1] for case in generator.generated_cases(SEEDS))
    assert set(counts) == set(generator.CATEGORIES)
    assert min(counts.values()) >= 15
