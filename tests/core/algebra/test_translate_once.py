"""The front end translates a query once, in the algebra layer: the C-SPARQL checks read the variables the
WHERE clause binds from the same translation the plan is built on."""

from __future__ import annotations

from csparql.core.algebra import translate as translate_module
from csparql.core.algebra.translate import Translation, translate
from csparql.core.frontend import compile_query, parse_query

QUERY = """
REGISTER QUERY counts AS
PREFIX ex: <http://example.org/>
SELECT ?s ?n
FROM STREAM <http://example.org/stream> [RANGE 10m STEP 5m]
WHERE { ?s ex:p/ex:q [ ex:r ?o ] . OPTIONAL { ?o ex:t ?n } FILTER(?n > 1) }
AGGREGATE { (?c, COUNT, {?s}) }
"""


def test_the_where_clause_is_translated_once(monkeypatch):
    translated = []
    group = Translation.group

    def counting(self, pattern):
        translated.append(pattern)
        return group(self, pattern)

    monkeypatch.setattr(translate_module.Translation, "group", counting)
    query = parse_query(QUERY)
    translated.clear()
    compile_query(QUERY)
    assert [pattern for pattern in translated if pattern is query.where or pattern == query.where] == [query.where]


def test_the_front_end_plan_is_the_algebra_layer_translation():
    query = parse_query(QUERY)
    translation = Translation(query)
    where = translation.where()
    plan = translation.plan()
    assert plan == translate(query) == compile_query(QUERY)
    assert where is translation.where()
