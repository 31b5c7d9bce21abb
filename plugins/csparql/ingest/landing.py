"""Landing folders: the files dropped for a stream, each landed exactly once.

A stream's landing folder holds the files waiting to be ingested (names starting with ``.`` are left alone, so
a writer can fill ``.name`` and rename it when complete). ``land_waiting_files`` lands them in name order,
one commit per file, and then moves each to ``done/``; a file refused as a whole moves to ``rejected/`` with
a ``.reason`` beside it, and the lines refused inside a landed file go to ``rejected/<file>.rejects.tsv``.

Exactly once
    The commit and the move are two steps, and a process can die between them (a killed task, a lost
    machine); landing that file again would store its triples twice. Every ingest records what identifies its
    content in its commit (``csparql.ingest.ingest.content_digest``: the stream and the file's SHA-256), and
    lands no content a commit of the stream landed already (``csparql ingest`` the same); so a file whose
    content has landed, under this name or another, moves to ``done/`` without landing again
    (``LandingSummary.already_landed``). Besides, so that this needs no Spark after a stop, the run writes an
    intent record before landing a file, ``.landing.json`` (the file's name, its SHA-256, its content digest and
    the table's version), and deletes it once the file has moved. ``finish_interrupted_landing``, which every
    run calls first, reads a record left behind: when a commit after the recorded version landed that content,
    the file only moves to ``done/`` (and the stream's watermark advances to where that commit's ingest
    advances it, as the interrupted ingest would have done, but never past the wall clock plus the maximum
    future skew; only the per-predicate statistics the optimizer orders joins by miss that file's triples);
    otherwise it stays waiting and lands like any other.

Two ingesters on one folder
    Two runs may land the same folder at once (a user's DAG beside the stream's own, a manual run). Each file
    is landed under an exclusive lock of the folder (``flock`` of the folder itself), held from its intent
    record to its move: the other ingester waits for it, then finds the file gone (moved to ``done/`` or ``rejected/``),
    skips it with one logged line (``LandingSummary.taken``), and lands the next. The intent record of an
    interrupted landing is completed under the same lock.

Timestamps in the future
    Lines timestamped later than the ingest's clock plus ``max_future_skew`` (``CSPARQL_MAX_FUTURE_SKEW``)
    are refused like malformed ones, into ``rejected/<file>.rejects.tsv`` (see ``csparql.ingest.ingest``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from csparql.ingest.ingest import (
    InputError, complete_watermark, content_digest, ingest_stream, landed_commit, landed_content, sha256_of,
)
from csparql.storage import delta
from csparql.storage.files import write_text_atomically
from csparql.storage.tables import LANDED_FILE, LANDED_SHA256
from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import MAX_FUTURE_SKEW, check_future_skew, future_bound

INTENT = ".landing.json"

log = logging.getLogger(__name__)


@dataclass
class LandingSummary:
    """What one pass over a landing folder did."""

    landed: int = 0  # triples committed
    files: int = 0  # files that were waiting
    rejected: int = 0  # files refused as a whole
    recovered: list[str] = field(default_factory=list)  # files an interrupted run had landed but not moved
    already_landed: list[str] = field(default_factory=list)  # files whose content an earlier commit landed
    landed_files: list[str] = field(default_factory=list)  # files this pass landed (now in done/)
    taken: list[str] = field(default_factory=list)  # files another ingester landed or refused meanwhile

    def to_dict(self) -> dict:
        """The summary as the ingestion task returns it (its XCom)."""
        return {"landed": self.landed, "files": self.files, "rejected": self.rejected, "recovered": self.recovered,
                "already_landed": self.already_landed, "landed_files": self.landed_files, "taken": self.taken}


def waiting_files(folder: Path) -> list[Path]:
    """The files waiting in a landing folder, in name order (hidden files excluded)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """The landing folder's exclusive lock, waited for: one file is landed at a time per folder. The lock is
    the folder's own (no lock file), and the system drops it with a process that dies holding it."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def finish_interrupted_landing(warehouse: Warehouse, stream: str, folder: Path,
                               max_future_skew: int = MAX_FUTURE_SKEW) -> list[str]:
    """Completes the landing an earlier run left half done (see the module docstring); returns the names of
    the files it moved to ``done/`` because they had landed already. Needs no Spark."""
    if not (folder / INTENT).exists():
        return []
    with folder_lock(folder):
        return _finish_interrupted_landing(warehouse, stream, folder, max_future_skew)


def _finish_interrupted_landing(warehouse: Warehouse, stream: str, folder: Path, max_future_skew: int) -> list[str]:
    intent_path = folder / INTENT
    if not intent_path.exists():
        return []
    try:
        intent = json.loads(intent_path.read_text(encoding="utf-8"))
        name, digest, version = intent["file"], intent["sha256"], int(intent["version"])
        content = intent.get("content")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        log.warning("%s is unreadable (%s); ignoring it", intent_path, error)
        intent_path.unlink(missing_ok=True)
        return []
    recovered = []
    path = folder / name
    table = warehouse.stream(stream)
    landed = None
    if path.is_file() and sha256_of(path) == digest:
        if content is not None:
            landed = landed_content(table, content, after_version=version)
        else:  # a record written before contents were recorded: its commit names the file and its digest
            landed = landed_commit(table, lambda c: c.get(LANDED_FILE) == name and c.get(LANDED_SHA256) == digest,
                                   after_version=version)
    if landed is not None:
        try:  # the interrupted run may not have advanced the watermark
            complete_watermark(warehouse, stream, landed, future_bound(max_future_skew))
        except ValueError as error:  # a watermark outside the instants csparql evaluates
            log.warning("%s: the stream's watermark was not advanced: %s", name, error)
        _move(path, folder / "done")
        recovered.append(name)
        log.warning("%s had landed before the run landing it stopped; moved to done/ without landing it again",
                    name)
    intent_path.unlink(missing_ok=True)
    return recovered


def land_waiting_files(start_spark: Callable[[], SparkSession], warehouse: Warehouse, stream: str,
                       folder: Path, max_future_skew: int = MAX_FUTURE_SKEW,
                       timestamp_predicates: Sequence[str] = DEFAULT_TIMESTAMP_PREDICATES) -> LandingSummary:
    """Lands every file waiting in ``folder`` into ``stream``, each in its own commit and exactly once (see
    the module docstring); lines timestamped later than the clock plus ``max_future_skew`` (µs) are refused;
    named graphs are timestamped by a triple with one of ``timestamp_predicates``.
    ``start_spark`` is called only when a file is waiting; ``ValueError`` for a skew csparql does not accept
    (``check_future_skew``), before any file is touched."""
    check_future_skew(max_future_skew)
    summary = LandingSummary(recovered=finish_interrupted_landing(warehouse, stream, folder, max_future_skew))
    files = waiting_files(folder)
    summary.files = len(files)
    if not files:
        return summary
    session = start_spark()
    (folder / "rejected").mkdir(exist_ok=True)
    for path in files:
        with folder_lock(folder):
            summary.recovered.extend(_finish_interrupted_landing(warehouse, stream, folder, max_future_skew))
            if not path.is_file():
                summary.taken.append(path.name)
                log.info("%s was landed by another ingester meanwhile (see done/ and rejected/); skipped", path.name)
                continue
            _land_file(session, warehouse, stream, folder, path, summary, max_future_skew, timestamp_predicates)
    return summary


def _land_file(session: SparkSession, warehouse: Warehouse, stream: str, folder: Path, path: Path,
               summary: LandingSummary, max_future_skew: int, timestamp_predicates: Sequence[str]) -> None:
    """Land one waiting file, holding the folder's lock (see the module docstring)."""
    done, rejected = folder / "done", folder / "rejected"
    table = warehouse.stream(stream)
    digest = sha256_of(path)
    version = delta.open_table(table).version() if delta.exists(table) else -1
    content = content_digest(stream, [path], None, timestamp_predicates, file_digests=[digest])
    write_text_atomically(folder / INTENT, json.dumps({"file": path.name, "sha256": digest, "version": version,
                                                       "content": content}))
    rejects = rejected / f"{path.name}.rejects.tsv"
    try:
        report = ingest_stream(session, warehouse, stream, [path], rejects=rejects,
                               commit_metadata={LANDED_FILE: path.name, LANDED_SHA256: digest},
                               max_future_skew=max_future_skew, timestamp_predicates=timestamp_predicates,
                               file_digests=[digest])
    except InputError as error:
        summary.rejected += 1
        (rejected / f"{path.name}.reason").write_text(f"{error}\n", encoding="utf-8")
        _move(path, rejected)
        log.warning("%s refused: %s", path.name, error)
    else:
        if report.already_landed is not None:
            summary.already_landed.append(path.name)
            _move(path, done)
            log.warning("%s: its content already landed in %s; moved to done/ without landing it again",
                        path.name, report.already_landed.describe())
        else:
            summary.landed += report.landed
            if not report.rejected:
                rejects.unlink(missing_ok=True)  # written even when empty
            _move(path, done)
            summary.landed_files.append(path.name)
            log.info("%s: %d triple(s) landed, %d line(s) refused", path.name, report.landed, report.rejected)
    (folder / INTENT).unlink()


def _move(path: Path, folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    shutil.move(path, folder / path.name)
