"""Join ordering's greedy choice, against the plain statement of it: each step takes the cheapest (then first)
item among those sharing a variable with the items taken so far, or among all remaining items when none does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rdflib import Variable

from csparql.core.optimizer.order_joins import _greedy

VARIABLES = [Variable(name) for name in "abcdefgh"]


def plain_greedy(items: list, cost, variables) -> list:
    remaining = list(enumerate(items))
    chosen, bound = [], set()
    while remaining:
        connected = [(i, item) for i, item in remaining if bound & variables(item)] if chosen else []
        index, best = min(connected or remaining, key=lambda pair: (cost(pair[1]), pair[0]))
        remaining = [(i, item) for i, item in remaining if i != index]
        chosen.append(best)
        bound |= variables(best)
    return chosen


items = st.lists(st.tuples(st.integers(0, 5), st.frozensets(st.sampled_from(VARIABLES), max_size=3)), max_size=30)


@settings(max_examples=300, deadline=None, database=None)
@given(items)
def test_the_greedy_order_is_the_plain_greedy_order(patterns):
    numbered = list(enumerate(patterns))  # equal patterns stay distinct items
    cost, variables = (lambda item: item[1][0]), (lambda item: set(item[1][1]))
    assert _greedy(numbered, cost, variables) == plain_greedy(numbered, cost, variables)
