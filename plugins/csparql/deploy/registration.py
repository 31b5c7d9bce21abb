"""Changing the registry: registering a query (its file, its loader, its facts and a new version, after
checking it deploys) and unregistering one. Every change holds the registry's lock."""

from __future__ import annotations

import os
import time
from pathlib import Path

from csparql.deploy.history import log_event, record_version, text_identity, text_owner, versions
from csparql.deploy.plan import deployment_of_text
from csparql.deploy.registry import (
    RegistrationError,
    check_registry_name,
    compile_text,
    dependent_dag_files,
    normalized_text,
    registry_lock,
    registry_snapshot,
    store_facts,
    touch_dag_files,
    write_loader,
)
from csparql.deploy.settings import Settings
from csparql.core.language.errors import QueryError
from csparql.storage.files import write_text_atomically


def register(source: str | os.PathLike, settings: Settings, name: str | None = None, replace: bool = False,
             by: str | None = None) -> Path:
    """Copy a query into the registry as ``<name>.rq`` with its loader, after checking it deploys; the name
    defaults to the REGISTER name, else the file's stem. ``RegistrationError`` leaves the registry unchanged."""
    source = Path(source)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistrationError(source, f"cannot be read: {error}") from None
    return register_text(text, settings, name=name or None, replace=replace, source_name=source.name,
                         default_name=source.stem, by=by)


def register_text(text: str, settings: Settings, name: str | None = None, replace: bool = False,
                  source_name: str = "<query>", default_name: str | None = None, by: str | None = None) -> Path:
    """Put a query text into the registry as ``<name>.rq`` with its loader, after checking it deploys, and
    record it as a new version (``versions``) when it differs from the latest one. The name defaults to the
    REGISTER name, else ``default_name``. ``RegistrationError`` (with the parser's line, column and caret for
    a query that does not parse) leaves the registry unchanged. The DAG files whose DAGs the change alters
    besides its own (``dependent_dag_files``) are touched, so that Airflow parses them again at once."""
    text = normalized_text(text)
    try:
        compiled = compile_text(text, source_name)
    except QueryError as error:
        raise RegistrationError(source_name, "\n" + error.render()) from None
    plan = compiled.plan
    name = name or compiled.registered_name or default_name
    if not name:
        raise RegistrationError(source_name, "give the query a name: it has no REGISTER clause")
    check_registry_name(name, settings)  # before the lock: a name with path tricks touches no folder
    target = settings.registry / f"{name}.rq"
    with registry_lock(settings):
        previous = target.read_text(encoding="utf-8") if target.exists() else None
        if previous is not None and not replace and previous != text:
            raise RegistrationError(target, "a different query is already registered under this name: "
                                            "unregister it first, pass --replace, or choose another name with --as")
        before = registry_snapshot(settings)
        deployment_of_text(compiled, name, settings, before)  # e.g. its name collides, or its stream has a producer
        check_results_are_its_own(plan, text, name, previous, settings)
        if previous is not None and not versions(name, settings):
            record_version(name, previous, settings, by=None)  # registered before versions were kept
        record_version(name, text, settings, by=by)
        write_text_atomically(target, text)
        facts = compiled.facts
        store_facts(compiled.digest, facts, settings)
        write_loader(target)
        touch_dag_files(dependent_dag_files(before, target, facts, settings))
    return target


def check_results_are_its_own(plan, text: str, name: str, previous: str | None, settings: Settings) -> None:
    """Refuse (``RegistrationError``, one line) to register ``text`` as ``name`` when a result table of ``name``
    in the warehouse holds the results of another query text that is neither a saved version of the query
    registered as ``name`` nor the registry's file it replaces (``previous``): an edit keeps its results, a
    different query gets its own."""
    from csparql.storage.results import QueryTextCollision, ResultTable, TextOwner

    # replacing the registry's file of name: an edit; else a new registration, of a saved version or not
    owner = text_owner(text, name, settings, registered=previous is not None)
    replaced = text_identity(previous) if previous is not None else None
    edit = TextOwner(owner.identity, owner.version,
                     lambda identity: identity == replaced or owner.same_query(identity))
    try:
        ResultTable.check_owner(settings.warehouse, plan, name, edit)
    except QueryTextCollision as error:
        raise RegistrationError(settings.registry / f"{name}.rq", str(error)) from None


def unregister(name: str, settings: Settings, by: str | None = None) -> list[Path]:
    """Remove a query and its loader from the registry (its results and its versions stay); the DAG files whose
    DAGs that changes are touched (``dependent_dag_files``)."""
    check_registry_name(name, settings)
    removed = []
    with registry_lock(settings):
        before = registry_snapshot(settings)
        for suffix in (".rq", ".py"):
            path = settings.registry / f"{name}{suffix}"
            if path.exists():
                path.unlink()
                removed.append(path)
        if not removed:
            raise RegistrationError(settings.registry / f"{name}.rq", "no query is registered under this name")
        touch_dag_files(dependent_dag_files(before, settings.registry / f"{name}.rq", None, settings))
        if versions(name, settings):
            log_event(name, settings, {"event": "unregistered", "at": time.time_ns() // 1000, "by": by})
    return removed
