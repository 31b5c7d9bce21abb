"""Small files written so that a reader never sees half of them."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path``'s content in one step: a reader (Airflow's DAG processor, the next ingestion run) sees
    the old content or the new, never part of it, and a failure leaves no temporary file behind. In an object
    store (``csparql.storage.location.ObjectPath``) an object is always written whole."""
    if not isinstance(path, Path):
        path.write_text(text)
        return
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
