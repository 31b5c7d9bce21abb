"""Rejected lines: the TSV files each byte range writes its rejects to, and reading them back; where a parser
failed in a file parsed whole (``parser_position``) and the text of that line (``line_text``).

A reject is ``file index <TAB> line <TAB> reason <TAB> text``, fields escaped (``escape_field``). Executors
write them (``csparql.ingest.parsers.ranges``), so this module imports neither Spark nor Delta.
"""

from __future__ import annotations

import os
import re

from csparql.storage.location import is_remote, location

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
    lines = "".join(f"{file_index}\t{number}\t{escape_field(reason)}\t{escape_field(text)}\n"
                    for number, reason, text in rejects)
    if is_remote(path):  # an object is written whole: no partial file is ever seen
        location(path).write_text(lines)
        return
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(lines)
    os.replace(temporary, path)


def read_rejects(path: str) -> list[tuple[int, int, str, str]]:
    """The rejects one range wrote: (file index, line, reason, text), fields still escaped."""
    rows = []
    text = location(path).read_text(encoding="utf-8")
    for line in text.splitlines():
        file_index, number, reason, text = line.split("\t", 3)
        rows.append((int(file_index), int(number), reason, text))
    return rows


def parser_position(error: Exception) -> tuple[int, str]:
    """The line (0 when unknown) and a one-line message of an rdflib parser error."""
    line = 0
    lines = getattr(error, "lines", None)  # rdflib's notation3/turtle BadSyntax: 0-based line
    if isinstance(lines, int):
        line = lines + 1
    elif hasattr(error, "getLineNumber"):  # xml.sax
        try:
            line = int(error.getLineNumber())
        except Exception:
            line = 0
    elif isinstance(getattr(error, "lineno", None), int):  # json
        line = error.lineno
    message = " ".join(str(error).split()) or type(error).__name__
    if len(message) > 300:
        message = message[:297] + "..."
    return line, f"the file could not be parsed: {message}"


def line_text(path, line: int) -> str:
    """The text of line ``line`` (1-based) of the file at ``path``, without its newline; "" when there is none."""
    if line <= 0:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                if number == line:
                    return text.rstrip("\r\n")
    except OSError:
        pass
    return ""
