"""rsp-rs (Rust over Oxigraph, from crates.io) as a peer in the per-window profile (``./bench.sh --profile``).

Where ``cargo`` is on the PATH, the harness in ``benchmarks/rsp_rs`` (``rsp-rs`` pinned in its ``Cargo.toml``)
is built once with ``cargo build --release`` — the first build downloads the crates from crates.io and compiles
Oxigraph with its RocksDB, several minutes on two cores — and evaluates the profiled window: the window's
triples pushed as timestamped events into one tumbling window as wide as the query's range, the static graph
added as rsp-rs's background knowledge, the query in RSP-QL (``RSP_QL``), timed from the first event pushed
to the last binding received, ``repetitions`` times after a warm-up, each with a new engine. Its answer is
compared with the engine's. Only the workloads of ``RSP_QL`` are measured: rsp-rs reads RSP-QL, not C-SPARQL,
so each has its hand-written RSP-QL form; every other workload is reported as not run, with the reason.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

from benchmarks import data

HARNESS = Path(__file__).resolve().parent / "rsp_rs"
WINDOW = "http://example.org/csparql/benchmark/window"

RSP_QL = {
    "district_count": f"""PREFIX c: <http://linkedurbandata.org/city#>
PREFIX t: <http://linkedurbandata.org/traffic#>
REGISTER RStream <http://example.org/csparql/benchmark/output> AS
SELECT ?district (COUNT(*) AS ?passages)
FROM NAMED WINDOW <{WINDOW}> ON STREAM <{data.MILAN_TOLLGATES}> [RANGE {{width}} STEP {{width}}]
WHERE {{{{
WINDOW <{WINDOW}> {{{{ ?tollgate t:registers ?car . }}}}
?tollgate c:placedIn ?street .
?district c:contains ?street .
}}}}
GROUP BY ?district
""",
}
"""Each measured workload's query in RSP-QL (``{width}``: the window's range in ms), with the semantics of its
C-SPARQL form: the window's triples in the window's graph, the static graph as the default graph."""
VARIABLES = {"district_count": ("district", "passages")}
"""Each measured workload's projected variables, in the order of its answer's rows."""


@functools.cache
def harness_binary() -> tuple[Path | None, str]:
    """The built harness, or None and why it is not there (no cargo, or why the build failed: one line). Built,
    or found unbuildable, once per process: a failed build is not tried again for the next workload."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return None, "cargo is not on the PATH"
    build = subprocess.run([cargo, "build", "--release", "--quiet", "--manifest-path", str(HARNESS / "Cargo.toml")],
                           capture_output=True, text=True, timeout=3600)
    binary = HARNESS / "target" / "release" / "csparql-rsp-rs-peer"
    if build.returncode != 0 or not binary.exists():
        return None, "the rsp-rs harness did not build: " + build_failure(build.stderr)
    return binary, ""


def build_failure(output: str) -> str:
    """Why a cargo build failed, in one line: its first error line, and what to install when the reason is
    the missing libclang that RocksDB's bindings (a dependency of rsp-rs's Oxigraph) are generated with."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith("error")), lines[-1] if lines else "no output")
    if "libclang" in output:
        return f"{first} (it needs libclang: on Debian, apt-get install libclang-dev)"
    return first


def measure(workload, window, work: Path, repetitions: int) -> dict:
    """rsp-rs over the window of ``window`` (a ``benchmarks.workloads.WindowFiles``): its median milliseconds
    and its answer (``benchmarks.workloads.Answer``), or the reason it was not run."""
    if workload.name not in RSP_QL:
        return {"rsp_rs_reason": "no RSP-QL form of this workload"}
    binary, reason = harness_binary()
    if binary is None:
        return {"rsp_rs_reason": reason}
    (piece,) = window.streams.values()
    width_ms = (piece.end - piece.start) // 1000
    work.mkdir(parents=True, exist_ok=True)
    files = _export(window, piece, work)
    (work / "query.rq").write_text(RSP_QL[workload.name].format(width=width_ms), encoding="utf-8")
    run = subprocess.run([str(binary), str(work / "query.rq"), str(files["events"]), str(files["times"]),
                          str(files["static"]), piece.iri, str(width_ms), str(repetitions)],
                         capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        return {"rsp_rs_reason": "rsp-rs failed: " + " ".join(run.stderr.split()[-40:])}
    printed = json.loads(run.stdout.strip().splitlines()[-1])
    return {"rsp_rs_ms": statistics.median(printed["milliseconds"]),
            "rsp_rs_answer": answer_of_bindings(printed["bindings"], VARIABLES[workload.name])}


def _export(window, piece, work: Path) -> dict[str, Path]:
    """The window's triples in timestamp order (N-Triples, and each one's ms after the window's start: above
    0, at most its width) and the static graph (N-Triples)."""
    import duckdb

    from benchmarks.workloads import _files, ntriples_line

    line = ntriples_line()
    connection = duckdb.connect()
    try:
        connection.execute("SET TimeZone = 'UTC'")
        static = connection.sql(f"SELECT {line} || ' .' AS line FROM read_parquet({_files(window.static)})"
                                ).to_arrow_table().column("line").to_pylist() if window.static else []
        events = connection.sql(  # the window is a set: each triple once, at its latest timestamp
            f"SELECT epoch_ms(ts) - {piece.start // 1000} AS ms, {line} || ' .' AS line FROM "
            f"(SELECT s, p, o, max(ts) AS ts FROM read_parquet({_files(piece.files)}) WHERE ts > "
            f"make_timestamp({piece.start}) AND ts <= make_timestamp({piece.end}) GROUP BY s, p, o) "
            "ORDER BY ms").to_arrow_table().to_pylist()
    finally:
        connection.close()
    paths = {"events": work / "events.nt", "times": work / "events.ts", "static": work / "static.nt"}
    paths["events"].write_text("".join(row["line"] + "\n" for row in events), encoding="utf-8")
    paths["times"].write_text("".join(f"{row['ms']}\n" for row in events), encoding="utf-8")
    paths["static"].write_text("".join(line + "\n" for line in static), encoding="utf-8")
    return paths


_STRING = r'"((?:[^"\\]|\\.)*)"'
_BINDING = re.compile(
    r'Variable \{ name: "(\w+)" \}: (?:'
    rf'NamedNode\(NamedNode \{{ iri: {_STRING} \}}\)'
    r'|(BlankNode)\('
    rf'|Literal\(Literal\(String\({_STRING}\)\)\)'
    rf'|Literal\(Literal\(LanguageTaggedString \{{ value: {_STRING}, language: {_STRING} \}}\)\)'
    rf'|Literal\(Literal\(TypedLiteral \{{ value: {_STRING}, datatype: NamedNode \{{ iri: {_STRING} \}} \}}\)\))')
"""One binding of Oxigraph's ``QuerySolution`` in Rust's debug form: an IRI, a blank node (whose label that
form does not print), a simple, language-tagged or typed literal."""
_ESCAPE = re.compile(r'\\(u\{[0-9a-fA-F]+\}|.)')


def _unescaped(text: str) -> str:
    """A string as Rust's debug form printed it, unescaped."""
    def one(match: re.Match) -> str:
        escape = match.group(1)
        if escape.startswith("u{"):
            return chr(int(escape[2:-1], 16))
        return {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(escape, escape)

    return _ESCAPE.sub(one, text)


def parse_bindings(bindings: list[str]) -> list[dict]:
    """rsp-rs's bindings (Rust's debug form of each Oxigraph solution) as variable → rdflib term."""
    from rdflib import BNode, Literal, URIRef

    rows = []
    for binding in bindings:
        row = {}
        for name, iri, blank, simple, tagged, language, typed, datatype in _BINDING.findall(binding):
            if iri:
                row[name] = URIRef(_unescaped(iri))
            elif blank:
                row[name] = BNode()
            elif language:
                row[name] = Literal(_unescaped(tagged), lang=language)
            elif datatype:
                row[name] = Literal(_unescaped(typed), datatype=URIRef(_unescaped(datatype)))
            else:
                row[name] = Literal(_unescaped(simple))
        rows.append(row)
    return rows


def answer_of_bindings(bindings: list[str], variables: tuple[str, ...]):
    """rsp-rs's bindings as a ``benchmarks.workloads.Answer`` (rows of ``variables``' terms)."""
    from benchmarks.workloads import answer_of_rows

    return answer_of_rows([tuple(row.get(name) for name in variables) for row in parse_bindings(bindings)])
