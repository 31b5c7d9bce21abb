"""Which query language a text is written in: C-SPARQL or RSP-QL.

``detect_dialect(text)`` looks for the words only RSP-QL has — ``REGISTER RSTREAM|ISTREAM|DSTREAM``, ``FROM
NAMED WINDOW``, a ``WINDOW`` pattern — outside IRIs, strings and comments. Any other text, plain SPARQL
included, is read as C-SPARQL (which contains SPARQL 1.1). Every command that takes a query also takes
``--dialect`` to say it instead.
"""

from __future__ import annotations

import re

from csparql.core.language.parser import DIALECTS

CSPARQL, RSPQL = DIALECTS
DIALECT_NAMES = {CSPARQL: "C-SPARQL", RSPQL: "RSP-QL"}

# What a query may contain that could hide a keyword: IRIs, strings (long ones first) and comments.
_OPAQUE = re.compile(
    r"""<[^<>"{}|^`\\\x00-\x20]*>|\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#[^\n]*"""
)
_WORD_START, _WORD_END = r"(?<![A-Za-z0-9_:?$.\-])", r"(?![A-Za-z0-9_:\-])"
_RSPQL_MARKERS = re.compile(
    rf"{_WORD_START}(?:REGISTER\s+(?:RSTREAM|ISTREAM|DSTREAM)|WINDOW){_WORD_END}", re.IGNORECASE
)


def detect_dialect(text: str) -> str:
    """``"rspql"`` when the text uses a construct only RSP-QL has, else ``"csparql"``."""
    visible = _OPAQUE.sub(lambda match: "<>" if match.group(0).startswith("<") else " ", text)
    return RSPQL if _RSPQL_MARKERS.search(visible) else CSPARQL
