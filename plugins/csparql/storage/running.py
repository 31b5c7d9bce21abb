"""Evaluations recorded as running, for ``vacuum`` to know who may be reading files it would delete.

An evaluation lists the files of the tables it reads, then reads them; a file removed by a commit in between
(a window replaced, a record table compacted) stays readable only until ``vacuum`` deletes it. While it runs,
an evaluation keeps a small JSON file, its lease, in ``_csparql/running/`` (an id, the query and the instant it
evaluates at, its process and host, when it started), removed when it ends, however it ends. A lease whose
process is gone (on this host) or that is older than ``LEASE_HOURS`` (another host's, whose process cannot be
checked) does not count, and ``running_evaluations`` removes this host's dead ones. The runs table itself records evaluations once they end.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from csparql.storage.files import write_text_atomically
from csparql.storage.warehouse import Warehouse

log = logging.getLogger(__name__)

LEASES_FOLDER = "_csparql/running"
"""Where, under the warehouse's root, the leases of running evaluations are (JSON files, not a table)."""
LEASE_HOURS = 24
"""How long a lease of another host counts as running (its process cannot be checked from here)."""
HOUR = 3_600_000_000


@dataclass(frozen=True)
class RunningEvaluation:
    """One lease: the evaluation, where it runs and since when (µs)."""

    run_id: str
    query: str
    at: int  # the instant it evaluates at (µs)
    started_at: int
    pid: int
    host: str

    def describe(self) -> str:
        from csparql.core.windows import format_instant

        return (f"{self.query} at {format_instant(self.at)} (process {self.pid} on {self.host}, since "
                f"{format_instant(self.started_at)})")


def leases_folder(warehouse: Warehouse) -> Path:
    return warehouse.root / LEASES_FOLDER


@contextmanager
def running(warehouse: Warehouse, run_id: str, query: str, at: int) -> Iterator[None]:
    """Keep a lease for the evaluation of ``query`` at ``at`` (µs) while the block runs. A lease that cannot be
    written (a read-only warehouse) is logged, and the evaluation runs all the same; a warehouse whose folder
    does not exist yet (a first evaluation that does not write) has nothing to vacuum and gets none."""
    lease = RunningEvaluation(run_id, query, at, time.time_ns() // 1000, os.getpid(), socket.gethostname())
    path: Path | None = leases_folder(warehouse) / f"{run_id}.json"
    try:
        if warehouse.root.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(path, json.dumps(asdict(lease)))
        else:
            path = None
    except OSError as error:
        log.warning("could not record the evaluation of %s as running in %s (%s): a vacuum with a retention "
                    "under 1h would not wait for it", query, path.parent, error)
        path = None
    try:
        yield
    finally:
        if path is not None:
            path.unlink(missing_ok=True)


def running_evaluations(warehouse: Warehouse, now: int | None = None) -> list[RunningEvaluation]:
    """The evaluations recorded as running, oldest first; the leases of this host's ended processes are
    removed on the way."""
    folder = leases_folder(warehouse)
    if not folder.is_dir():
        return []
    now = time.time_ns() // 1000 if now is None else now
    host = socket.gethostname()
    found = []
    for path in folder.glob("*.json"):
        try:
            lease = RunningEvaluation(**json.loads(path.read_text()))
        except FileNotFoundError:
            continue  # it ended meanwhile
        except (OSError, ValueError, TypeError):
            continue  # not a lease (leases are written in one step)
        if lease.host == host:
            if not _alive(lease.pid):
                path.unlink(missing_ok=True)
                continue
        elif now - lease.started_at > LEASE_HOURS * HOUR:
            continue
        found.append(lease)
    return sorted(found, key=lambda lease: lease.started_at)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
