"""Failures of the machine and of stored data, told apart from defects: a full disk and a corrupt Delta log entry.

Errors reach csparql from three runtimes that each say "no space left on device" in their own way: Python's
``OSError`` (errno ``ENOSPC``), delta-rs's ``DeltaError``/``OSError`` and Rust panics ("No space left on device
(os error 28)"), and Spark's Java errors, whose text holds the Java cause chain ("Caused by:
java.io.IOException: No space left on device"). ``no_space_left`` recognises all three, through an error's
causes too, without importing any of those runtimes. ``corrupt_log_entry`` finds the first log entry of a Delta
table that cannot be read (delta-rs's own error names neither the table nor the version). ``describe`` gives
an error in one line, a Spark Connect failure with its gRPC status and details (pyspark prints those only as
the first line of a multi-line text, ``<_InactiveRpcError of RPC that terminated with:``).
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator

NO_SPACE_LEFT = "no space left on device"
_NO_SPACE_TEXT = re.compile(r"no space left on device|os error 28\b|\bENOSPC\b", re.IGNORECASE)
_LOG_ENTRY = re.compile(r"^(\d{20})\.json$")


class StorageError(Exception):
    """A Delta operation failed for a reason the user should see (the message says what and where); also
    ``csparql.storage.delta.StorageError``."""


def causes(error: BaseException) -> Iterator[BaseException]:
    """The error and the errors it was raised from or while handling, nearest first (each once)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def no_space_left(error: BaseException) -> bool:
    """Whether the error, or one of its causes, is a write that found the disk full."""
    for cause in causes(error):
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True
        if _NO_SPACE_TEXT.search(_text(cause)):
            return True
    return False


def _text(error: BaseException) -> str:
    """The error's text; for a Java error (py4j), with the Java exception and its causes."""
    try:
        text = str(error)
        # pyspark's errors keep the Java stack trace (with its causes) apart from their message
        java_trace = getattr(error, "_stackTrace", None)
        return f"{text}\n{java_trace}" if isinstance(java_trace, str) else text
    except Exception:  # noqa: BLE001 - a Java error whose JVM is gone cannot print itself
        return type(error).__name__


def corrupt_log_entry(table: str | os.PathLike) -> tuple[int, str] | None:
    """The first commit of the table's ``_delta_log`` that is not a file of JSON lines: its version and what is
    wrong with it; None when every entry reads (or there is no log)."""
    from csparql.storage.location import location

    log = location(table) / "_delta_log"
    try:
        names = sorted(entry.name for entry in log.iterdir() if _LOG_ENTRY.match(entry.name))
    except OSError:
        return None
    for name in names:
        version = int(name[:20])
        try:
            lines = [line for line in (log / name).read_text(encoding="utf-8").split("\n") if line.strip()]
        except (OSError, UnicodeDecodeError) as error:
            return version, f"it cannot be read ({error})"
        if not lines:
            return version, "it is empty"
        for number, line in enumerate(lines, 1):
            try:
                action = json.loads(line)
            except ValueError as error:
                return version, f"line {number} is not JSON: {error}"
            if not isinstance(action, dict):
                return version, f"line {number} is not a JSON object"
    return None


_GRPC_STATUS_TEXT = re.compile(r'status = StatusCode\.(\w+)\s+details = "([^"\n]*)"')


def grpc_status(error: BaseException) -> tuple[str, str] | None:
    """The gRPC status code and details of a Spark Connect failure that has no error condition of Spark's
    (e.g. ``("UNAUTHENTICATED", "No authentication token provided")``): from the gRPC error among the error's
    causes, or from the text pyspark wraps it in; None for any other error, and for an error Spark named
    (``[TABLE_OR_VIEW_NOT_FOUND] …``, ``[INVALID_HANDLE.SESSION_CLOSED] …``), whose own text says more."""
    for cause in causes(error):
        condition = getattr(cause, "getCondition", None)
        if callable(condition) and condition():
            return None
        code, details = getattr(cause, "code", None), getattr(cause, "details", None)
        if callable(code) and callable(details):  # a grpc.RpcError that is also its call
            try:
                name, text = getattr(code(), "name", None), details()
            except Exception:  # noqa: BLE001 - an error object that cannot tell its status
                name = None
            if isinstance(name, str):
                return name, " ".join(str(text or "").split())
        found = _GRPC_STATUS_TEXT.search(_text(cause))
        if found:
            return found.group(1), " ".join(found.group(2).split())
    return None


def describe(error: BaseException) -> str:
    """The error in one line for a user: a Spark Connect failure as ``Spark Connect: STATUS: details``
    (``grpc_status``), a connection failure by its own message (it names the address), anything else as its
    type and first line (without the backtraces Rust and Java append)."""
    status = grpc_status(error)
    if status is not None:
        return f"Spark Connect: {status[0]}: {status[1]}" if status[1] else f"Spark Connect: {status[0]}"
    if isinstance(error, ConnectionError):
        return first_line(error)
    return f"{type(error).__name__}: {first_line(error)}"


def first_line(error: BaseException) -> str:
    """The first line of the error's text, without the backtrace delta-rs and Java append."""
    lines = [line.strip() for line in _text(error).strip().split("\n")]
    return next((line for line in lines if line), type(error).__name__)
