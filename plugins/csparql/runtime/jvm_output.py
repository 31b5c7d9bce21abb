"""The driver JVM's standard error, less the warning every Spark 4 JVM prints as it starts.

Spark's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``, and the JVM answers with
``WARNING: Using incubator modules: jdk.incubator.vector`` on its standard error, before anything runs, on
every command that starts a local Spark; no JVM option turns it off. ``incubator_warning_dropped()`` starts
the JVM with a pipe as its standard error: a thread copies what comes through to this process's standard
error, dropping only that line, for as long as the JVM lives.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

INCUBATOR_WARNING = b"WARNING: Using incubator modules:"


def _copy_dropping_warning(source: int, target: int) -> None:
    """Copy the lines read from ``source`` to ``target`` until end of file, except the incubator warning."""
    with os.fdopen(source, "rb", buffering=0) as pipe, os.fdopen(target, "wb", buffering=0) as out:
        pending = b""
        while True:
            try:
                chunk = pipe.read(65536)
            except OSError:
                break
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            kept = [line + b"\n" for line in lines if not line.startswith(INCUBATOR_WARNING)]
            if kept:
                try:
                    out.write(b"".join(kept))
                except OSError:
                    pass
        if pending and not pending.startswith(INCUBATOR_WARNING):
            try:
                out.write(pending)
            except OSError:
                pass


@contextmanager
def incubator_warning_dropped() -> Iterator[None]:
    """While the block runs, processes started from here get a standard error that drops the JVM's incubator
    warning (see the module docstring); this process's own standard error is back as it was after it."""
    try:
        read_end, write_end = os.pipe()
        saved = os.dup(2)
    except OSError:  # no file descriptors to spare: the warning stays
        yield
        return
    threading.Thread(target=_copy_dropping_warning, args=(read_end, os.dup(saved)), name="jvm-stderr",
                     daemon=True).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # the JVM keeps the pipe; the thread ends when it exits
        os.close(saved)
