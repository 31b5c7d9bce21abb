"""Writing stream and static tables directly (without the ingest command) for engine tests, and killing an
evaluation at a chosen point."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
from rdflib import URIRef

from csparql.storage import delta, schema
from csparql.storage.instants import bucket_of
from csparql.storage.statistics import record_statistics
from csparql.storage.terms import term_dict
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import from_micros


def write_stream(warehouse: Warehouse, iri: str, triples, first_arrival: int = 0, statistics: bool = True) -> None:
    """Append (s, p, o, τ) triples to a stream table in one commit."""
    path = warehouse.stream(iri)
    delta.ensure(path, schema.STREAM, schema.STREAM_PARTITIONS, {"csparql.iri": iri, "csparql.kind": "stream"})
    rows = [
        {"s": term_dict(s), "p": term_dict(p), "o": term_dict(o), "ts": from_micros(ts), "arrival": first_arrival + i, "bucket": bucket_of(ts)}
        for i, (s, p, o, ts) in enumerate(triples)
    ]
    delta.append(path, pa.Table.from_pylist(rows, schema=schema.STREAM), schema.STREAM, schema.STREAM_PARTITIONS)
    if statistics:
        counts: dict[str, int] = {}
        for _, p, _, _ in triples:
            counts[str(p)] = counts.get(str(p), 0) + 1
        record_statistics(warehouse, iri, "stream", counts, replaces=False)


def write_static(warehouse: Warehouse, iri: str | None, triples) -> None:
    """Append triples to a static graph table in one commit."""
    path = warehouse.static(iri)
    properties = {"csparql.kind": "static"} | ({"csparql.iri": iri} if iri else {})
    delta.ensure(path, schema.STATIC, None, properties)
    rows = [{"s": term_dict(s), "p": term_dict(p), "o": term_dict(o)} for s, p, o in triples]
    delta.append(path, pa.Table.from_pylist(rows, schema=schema.STATIC), schema.STATIC)
    counts: dict[str, int] = {}
    for _, p, _ in triples:
        counts[str(p)] = counts.get(str(p), 0) + 1
    record_statistics(warehouse, iri, "static", counts, replaces=False)


def iri(text: str) -> URIRef:
    return URIRef(text)


def kill_when_signalled(child: subprocess.Popen, signal_file: Path, point: str, timeout: float = 240) -> None:
    """SIGKILL ``child``'s process group as soon as it creates ``signal_file`` (it does so at ``point``, e.g.
    "its result commit"); fails the test when it ends or takes ``timeout`` seconds before getting there."""
    deadline = time.time() + timeout
    while not signal_file.exists():
        if child.poll() is not None:
            error = child.stderr.read() if child.stderr else ""
            raise AssertionError(f"the evaluation ended before {point}: {error}")
        assert time.time() < deadline, f"the evaluation never reached {point}"
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)


def wait_until_ready(child) -> None:
    """Read the first line of a child started with piped ``stdout`` and ``stderr``, which must be ``ready``.
    Anything else fails the test at once with everything the child wrote, the child killed first: reading its
    ``stderr`` while it still runs (it waits for the test's signal) would block forever."""
    line = child.stdout.readline()
    if line.strip() != "ready":
        child.kill()
        out, err = child.communicate(timeout=60)
        raise AssertionError(f"the child wrote {line!r} instead of 'ready'; then:\n{out}\n{err}")
