"""Rejected lines: the TSV files each byte range writes its rejects to, and reading them back.

A reject is ``file index <TAB> line <TAB> reason <TAB> text``, fields escaped (``escape_field``). Executors
write them (``csparql.ingest.ranges``), so this module imports neither Spark nor Delta.
"""

from __future__ import annotations

import os
import re

_FIELD_ESCAPES = re.compile(r"\\(.)")


def escape_field(text: str) -> str:
    """A TSV field: backslash, tab, newline and carriage return escaped."""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def unescape_field(text: str) -> str:
    """A TSV field as ``escape_field`` was given it."""
    return _FIELD_ESCAPES.sub(lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)


def write_rejects(path: str, file_index: int, rejects: list[tuple[int, str, str]]) -> None:
    """Rejects of one range as ``file index <TAB> line <TAB> reason <TAB> text`` lines (atomic: a retried
    task rewrites the same file)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        for number, reason, text in rejects:
            handle.write(f"{file_index}\t{number}\t{escape_field(reason)}\t{escape_field(text)}\n")
    os.replace(temporary, path)


def read_rejects(path: str) -> list[tuple[int, int, str, str]]:
    """The rejects one range wrote: (file index, line, reason, text), fields still escaped."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            file_index, number, reason, text = line.rstrip("\n").split("\t", 3)
            rows.append((int(file_index), int(number), reason, text))
    return rows

