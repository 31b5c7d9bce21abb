"""Large TriG and standard N-Quads files read in parts at once, one process per core.

pyoxigraph parses a file in one thread, and turning its quads into columns (``graphs.quad_columns``) is Python
work: on a large file of timestamped graphs that is most of an ingest. A file of at least ``PARALLEL_MIN_BYTES``
is therefore cut at line starts into as many parts as there are cores (at most ``MAX_PARTS``); this process
reads the first part, and a child process (``python -m csparql.ingest.parsers.graph_parts``) each other one, after the
prefix and base directives written before it.

The cuts are guesses, and checked: the parts are used only when every part but the last parses as a document
of its own (a statement cut in two does not: it ends unexpectedly) and ends with exactly the prefixes and base
its next part started with. Otherwise, or when a child fails, the file is read whole in this process, which
gives the same columns (and, for a file that is not valid, the same error with its line). Blank node labels
keep their meaning across parts: pyoxigraph keeps a file's labels, and the caller scopes them to the file.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyoxigraph as ox

from csparql.ingest.parsers.graphs import PARSED_FORMATS, QUADS, parse_quads, quad_columns

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
"""The smallest file read in parts: below it a child process's start (about 0.3 s) costs more than it saves."""
MAX_PARTS = 4
SPLIT_FORMATS = frozenset({"trig", "nquads"})
"""Formats whose statements can be told apart by line: TriG (checked, as above) and N-Quads (one per line)."""
CHILD_START_BYTES = 16 * 1024 * 1024
"""What the first part reads more than the others: about what this process parses while a child starts (a new
Python process) and sends its columns back."""
CUT_WINDOW_BYTES = 1024 * 1024
"""How far after its place a cut looks for the start of a statement."""
_STATEMENT_START = re.compile(rb"\n(?=[^\s#}\]).,;])")


def read_quads(path: Path, format: str, parts: int | None = None, min_bytes: int = PARALLEL_MIN_BYTES
               ) -> pa.Table:
    """The quads of the file at ``path`` in ``format`` (a key of ``graphs.PARSED_FORMATS``) as
    ``graphs.QUADS`` columns in the order written; read in ``parts`` (default: the cores, at most
    ``MAX_PARTS``) at once when the file has at least ``min_bytes``. ``SyntaxError`` for a file that is not
    valid, ``TypeError`` for a term a stream cannot hold, as ``graphs.quad_columns`` raises them."""
    parts = min(os.cpu_count() or 1, MAX_PARTS) if parts is None else parts
    if format in SPLIT_FORMATS and parts > 1 and Path(path).stat().st_size >= min_bytes:
        table = _read_in_parts(Path(path), format, parts)
        if table is not None:
            return table
    return quad_columns(parse_quads(path, format))


def _read_in_parts(path: Path, format: str, parts: int) -> pa.Table | None:
    """The file read in ``parts`` at once, or None when a cut cannot be trusted or a child failed. The children
    start first (a new Python process takes a while) and are handed their directives once they are found."""
    with open(path, "rb") as handle:
        cuts = _cuts(handle, path.stat().st_size, parts)
        if len(cuts) < 3:
            return None
        folder = tempfile.TemporaryDirectory(prefix="csparql-parts-")
        outputs = [Path(folder.name) / f"part-{number}.arrow" for number in range(1, len(cuts) - 1)]
        children: list[subprocess.Popen] = []
        try:
            for start, end, output in zip(cuts[1:-1], cuts[2:], outputs):
                children.append(_start_child(path, format, start, end, output))
            data = handle.read(cuts[-2])
            directives = _directives(data, cuts[-2])
            headers = [b"".join(text for at, text in directives if at < cut) for cut in cuts[1:-1]]
            for child, header in zip(children, headers):
                child.stdin.write(header)
                child.stdin.close()
            first = ox.parse(data[:cuts[1]], format=PARSED_FORMATS[format])
            del data
            try:
                tables = [quad_columns(first)]
            except SyntaxError:  # the cut split a statement: the file is read whole, as usual
                return None
            ends = [(first.prefixes, first.base_iri)]
            for child, output in zip(children, outputs):
                if child.wait() != 0:
                    return None
                with pa.OSFile(str(output)) as source:  # read into memory: the file goes with its folder
                    table = pa.ipc.open_file(source).read_all()
                tables.append(table.cast(QUADS))
                metadata = table.schema.metadata
                ends.append((json.loads(metadata[b"prefixes"]), json.loads(metadata[b"base"])))
        except (OSError, ValueError):  # no child could start, or one ended before reading its directives
            return None
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                child.wait()
            folder.cleanup()
    for end, header in zip(ends, headers):
        try:
            if end != _state_after(header, format):
                return None
        except SyntaxError:  # a line that looked like a directive and is not one
            return None
    return pa.concat_tables(tables)


def _cuts(handle, size: int, parts: int) -> list[int]:
    """Offsets 0 < c1 < ... < size cutting the file open as ``handle`` into ``parts`` parts (the first larger by
    ``CHILD_START_BYTES``, or a share of a smaller file, than the others), each cut at the start of a line that
    begins with neither a space, a comment nor a closing bracket (a new top-level statement, most likely);
    fewer when a part would be empty."""
    head_start = min(CHILD_START_BYTES, size // (parts + 1))
    share = (size - head_start) / parts
    cuts = [0]
    for number in range(1, parts):
        at = int(head_start + share * number)
        handle.seek(max(at - 1, 0))
        window = handle.read(CUT_WINDOW_BYTES)
        match = _STATEMENT_START.search(window)
        if match is None:
            break
        cut = max(at - 1, 0) + match.end()
        if cuts[-1] < cut < size:
            cuts.append(cut)
    handle.seek(0)
    return cuts + [size]


def _directives(data: bytes, end: int) -> list[tuple[int, bytes]]:
    """The directive lines starting before ``end`` (``@prefix``, ``@base``, or SPARQL's ``PREFIX`` and ``BASE``
    in any case, at the start of a line and followed by a space or tab), with their offsets, in file order,
    each ending with a newline."""
    found = []
    for needle in (b"refix", b"REFIX", b"ase", b"ASE"):  # found fast: a few scans of the bytes, not one per form
        at = data.find(needle, 1, end)
        while at >= 0:
            start = at - 1 if data[at - 1:at] in b"pPbB" else -1
            if start > 0 and data[start - 1:start] == b"@":
                start -= 1
            after = data[at + len(needle):at + len(needle) + 1]
            if start >= 0 and (start == 0 or data[start - 1:start] == b"\n") and after in (b" ", b"\t") \
                    and data[start:at + len(needle)].lstrip(b"@").lower() in (b"prefix", b"base"):
                line_end = data.find(b"\n", start)
                found.append((start, data[start:] + b"\n" if line_end < 0 else data[start:line_end + 1]))
            at = data.find(needle, at + 1, end)
    return sorted(found)


def _state_after(header: bytes, format: str) -> tuple[dict, str | None]:
    """The prefixes and base a parser holds after reading ``header`` (directives only)."""
    parser = ox.parse(header, format=PARSED_FORMATS[format])
    for _ in parser:
        pass
    return parser.prefixes, parser.base_iri


def _start_child(path: Path, format: str, start: int, end: int, output: Path) -> subprocess.Popen:
    """A child reading bytes ``start``..``end`` of the file into ``output``, once its directives are written
    to its stdin."""
    # the child imports what this process imports (Airflow, for one, puts its plugins folder on sys.path)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(entry for entry in sys.path if entry))
    command = [sys.executable, "-m", "csparql.ingest.parsers.graph_parts", format, str(path), str(start), str(end), str(output)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=environment)


def main(argv: list[str] | None = None) -> int:
    """A child: the quads of ``PATH``'s bytes ``START``..``END`` read after the directives on stdin, written to
    ``OUTPUT`` as an Arrow file whose schema's metadata gives the prefixes and base the part ended with."""
    format, path, start, end, output = argv if argv is not None else sys.argv[1:]
    gc.disable()  # millions of small objects that form no cycle; the process ends after one part
    header = sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        handle.seek(int(start))
        body = handle.read(int(end) - int(start))
    try:
        parser = ox.parse(header + body, format=PARSED_FORMATS[format])
        table = quad_columns(parser)
    except (SyntaxError, TypeError):
        return 2
    metadata = {"prefixes": json.dumps(parser.prefixes), "base": json.dumps(parser.base_iri)}
    with pa.ipc.new_file(output, table.schema.with_metadata(metadata)) as writer:
        writer.write_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
