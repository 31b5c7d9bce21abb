"""Seeded fuzzing: thousands of token-level mutations of the example corpus never fail other than cleanly.

A mutated query either compiles or raises ``QueryError`` with a position inside the text and a rendering;
any other exception is a bug. The seed is fixed, so a failure reproduces.
"""

from __future__ import annotations

import random
import re

from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from support import LANGUAGE_FIXTURES, read_blocks, spec_query_files

SEED = 20101122
MUTATIONS = 2400
TOKEN = re.compile(r'<[^>\s]*>|"[^"\n]*"|\?[\w-]+|[\w:.-]+|\S')
EXTRA_TOKENS = ["{", "}", "(", ")", "[", "]", ".", ";", ",", "FILTER", "OPTIONAL", "UNION", "SELECT", "WHERE",
                "STEP", "RANGE", "TUMBLING", "TRIPLES", "AGGREGATE", "COUNT", "REGISTER", "STREAM", "AS", "10m",
                "0m", "-1", "?x", "<http://e/p>", "ex:p", "'a'", "a", "*", "+", "||", "&&", "=", "!", "^", "/",
                "GRAPH", "BIND", "VALUES", "UNDEF", "FROM", "NAMED", "timestamp", "#", "\\", "\"", "'''", "@en"]


def corpus() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in spec_query_files()]
    texts += [b.text for b in read_blocks(LANGUAGE_FIXTURES / "valid_queries.rq")]
    return texts


def mutate(text: str, rng: random.Random) -> str:
    spans = [m.span() for m in TOKEN.finditer(text)]
    if not spans:
        return text
    kind = rng.choice(["delete", "insert", "swap", "duplicate", "replace"])
    i = rng.randrange(len(spans))
    start, end = spans[i]
    if kind == "delete":
        return text[:start] + text[end:]
    if kind == "insert":
        return text[:start] + rng.choice(EXTRA_TOKENS) + " " + text[start:]
    if kind == "duplicate":
        return text[:end] + " " + text[start:end] + text[end:]
    if kind == "replace":
        return text[:start] + rng.choice(EXTRA_TOKENS) + text[end:]
    j = rng.randrange(len(spans))
    (a0, a1), (b0, b1) = sorted([spans[i], spans[j]])
    if a1 > b0:
        return text
    return text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]


def test_mutated_queries_fail_only_cleanly():
    rng = random.Random(SEED)
    texts = corpus()
    outcomes = {"valid": 0, "refused": 0}
    for n in range(MUTATIONS):
        original = texts[n % len(texts)]
        text = mutate(mutate(original, rng), rng) if rng.random() < 0.3 else mutate(original, rng)
        try:
            compile_query(text, "fuzz.rq")
            outcomes["valid"] += 1
        except QueryError as error:
            outcomes["refused"] += 1
            rendered = error.render()
            assert rendered.startswith("fuzz.rq:"), rendered
            if error.span is not None:
                lines = text.split("\n")
                assert 1 <= error.span.line <= max(1, len(lines)), (text, rendered)
                assert error.span.column >= 1
        except Exception as error:  # noqa: BLE001 - this is what the test hunts for
            raise AssertionError(f"mutation {n} crashed with {type(error).__name__}: {error}\n--- query ---\n{text}") from error
    assert outcomes["refused"] > MUTATIONS // 3, outcomes
    assert outcomes["valid"] + outcomes["refused"] == MUTATIONS
