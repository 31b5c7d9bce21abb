"""Each optimizer rule, alone, against its fixture file of input plans and expected plans; and the rules never
change a query's meaning on the cases (checked by evaluating both plans in the engine's tests)."""

from __future__ import annotations

import pytest

from csparql.core.optimizer import RULES
from core.optimizer.fixtures import OPTIMIZER_FIXTURES, plan_after, read_cases

CASES = [
    (rule.__name__, case)
    for rule in RULES
    for case in read_cases(OPTIMIZER_FIXTURES / f"{rule.__name__}.txt")
]


def test_every_rule_has_fixtures():
    for rule in RULES:
        assert len(read_cases(OPTIMIZER_FIXTURES / f"{rule.__name__}.txt")) >= 3, rule.__name__


@pytest.mark.parametrize(("rule", "case"), CASES, ids=[f"{r}:{c.name}" for r, c in CASES])
def test_rule_gives_the_expected_plan(rule, case):
    assert plan_after(rule, case) == case.expected
