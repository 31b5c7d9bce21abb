"""Every saved version of every registered query, kept in the registry's ``.history`` folder: each text as
``v<n>.rq`` and a log of saves and removals (``log.jsonl``), so that results can name the version that wrote
them and the pages can show any earlier text."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from csparql.deploy.registry import RegistrationError, check_registry_name
from csparql.deploy.settings import Settings

if TYPE_CHECKING:  # the result tables load the query algebra: building a DAG must not
    from csparql.storage.results import TextOwner


def text_version(text: str) -> str:
    """The version of a query text: the first 12 hex digits of its SHA-256 (line endings as stored, LF)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@functools.lru_cache(maxsize=512)
def text_identity(text: str) -> str:
    """The identity of a query text: the first 12 hex digits of the SHA-256 of the query as the parser reads
    it (printed again by ``csparql.core.language.printer.format_query``), so that two texts differing only in
    layout or comments are one query; of the text itself when it cannot be printed so."""
    from csparql.core.frontend import parse_query
    from csparql.core.language.printer import format_query

    try:
        normal = format_query(parse_query(text))
    except Exception:  # not a valid query, or a dialect's form the printer does not print: the text itself
        normal = text.replace("\r\n", "\n")
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:12]


def registration_identities(name: str, settings: Settings) -> set[str]:
    """The identities (``text_identity``) of every saved version of the query registered as ``name``."""
    return {text_identity(version.text) for version in versions(name, settings)}


def text_owner(text: str, name: str, settings: Settings | None = None, registered: bool = False) -> TextOwner:
    """The query text ``text`` as the writer of the results of ``name`` (``TextOwner``): when ``text`` is a
    saved version of the query registered as ``name`` in the registry of ``settings``, the result tables
    created for its other versions are its own too (an edit saved through the registry); those of any other
    text are not. ``registered``: ``text`` is the registry's file of ``name`` itself, a version by being
    there; when the registry keeps no version of it (a file placed there by hand, edited by hand), every
    table of ``name`` is its own."""
    from csparql.storage.results import TextOwner

    identity = text_identity(text)

    def same_query(other: str) -> bool:
        if settings is None:
            return False
        try:
            known = registration_identities(name, settings)
        except (OSError, ValueError, RegistrationError):  # not a registry name, no readable history
            known = set()
        if registered:
            return other in known or not known
        return other in known and identity in known

    return TextOwner(identity, text_version(text), same_query)


HISTORY = ".history"
"""The folder of the registry that keeps every version of every query (Airflow's DAG processor reads only
``.py`` files, so it never parses it)."""


@dataclass(frozen=True)
class QueryVersion:
    """One saved text of a registered query: its number (1, 2, …), its ``text_version`` digest, when and by
    whom it was saved, and the file holding the text."""

    number: int
    digest: str
    saved_at: int
    saved_by: str | None
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def history_folder(name: str, settings: Settings) -> Path:
    return settings.registry / HISTORY / check_registry_name(name, settings)


def _events(name: str, settings: Settings) -> list[dict]:
    log = history_folder(name, settings) / "log.jsonl"
    if not log.exists():
        return []
    events = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash: the versions before it stay readable
    return events


def log_event(name: str, settings: Settings, event: dict) -> None:
    """Append ``event`` (a save, a removal) to the query's history log."""
    folder = history_folder(name, settings)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "log.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps(event) + "\n")


def versions(name: str, settings: Settings) -> list[QueryVersion]:
    """Every saved version of a query, oldest first (also after it was unregistered)."""
    folder = history_folder(name, settings)
    return [
        QueryVersion(e["version"], e["digest"], e["at"], e.get("by"), folder / f"v{e['version']}.rq")
        for e in _events(name, settings) if e.get("event") == "saved" and (folder / f"v{e['version']}.rq").exists()
    ]


def record_version(name: str, text: str, settings: Settings, by: str | None = None) -> QueryVersion:
    """Keep ``text`` as the query's next version, unless it is the latest version already. The caller holds
    ``registry_lock`` (``register_text`` does)."""
    saved = versions(name, settings)
    digest = text_version(text)
    if saved and saved[-1].digest == digest:
        return saved[-1]
    number = max((e.get("version", 0) for e in _events(name, settings)), default=0) + 1
    folder = history_folder(name, settings)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"v{number}.rq").write_text(text, encoding="utf-8")
    at = time.time_ns() // 1000
    log_event(name, settings, {"event": "saved", "version": number, "digest": digest, "at": at, "by": by})
    return QueryVersion(number, digest, at, by, folder / f"v{number}.rq")
