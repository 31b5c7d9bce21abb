"""What a registry file sets for its own deployment in comment lines, read once per text.

``# csparql revision-horizon 2h`` overrides ``CSPARQL_REVISION_HORIZON`` for that query (a C-SPARQL duration;
``0s``: its windows are never revised); ``# csparql panes auto|always|off`` says how its windows are computed
from panes. The last such line of each kind counts; the words are case-insensitive and may be followed by
``:`` or ``=``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from csparql.core.panes.modes import PANE_MODES, pane_mode
from csparql.core.windows import parse_duration
from csparql.deploy.errors import RegistrationError

REVISION_HORIZON = re.compile(r"^[ \t]*#[ \t]*csparql[ \t]+revision-horizon[ \t]*[:=]?[ \t]*(\S*)[ \t]*$",
                              re.IGNORECASE | re.MULTILINE)
"""A comment line that sets the file's revision horizon: ``# csparql revision-horizon 2h``."""

PANES = re.compile(r"^[ \t]*#[ \t]*csparql[ \t]+panes[ \t]*[:=]?[ \t]*(\S*)[ \t]*$", re.IGNORECASE | re.MULTILINE)
"""A comment line that says how the file's windows are computed from panes: ``# csparql panes auto`` (the
default: where the engine expects it to cost less), ``always`` (``on``: whenever the query allows it) or
``off`` (every window recomputed from its whole range, the reference)."""


@dataclass(frozen=True)
class FileSettings:
    """The settings a registry file's comment lines give: its revision horizon (µs) and its pane mode (one of
    ``csparql.core.panes.PANE_MODES``); None where the file says nothing, so the deployment's defaults apply."""

    revision_horizon: int | None = None
    panes: str | None = None

    @classmethod
    def of(cls, path: Path, text: str) -> FileSettings:
        """The settings ``text``, the content of ``path``, gives (read once per text in this process);
        ``RegistrationError`` naming the file and the line of a value that is not one."""
        try:
            return _file_settings(text)
        except ValueError as error:
            raise RegistrationError(path, str(error)) from None

    def to_dict(self) -> dict:
        """A JSON-ready form that ``from_dict`` reads back."""
        return {"revision_horizon": self.revision_horizon, "panes": self.panes}

    @classmethod
    def from_dict(cls, data: dict) -> FileSettings:
        """The settings ``to_dict`` gave; ``ValueError`` (or ``KeyError``, ``TypeError``) for anything else."""
        horizon, panes = data["revision_horizon"], data["panes"]
        if not (horizon is None or type(horizon) is int and horizon >= 0) or panes not in (None, *PANE_MODES):
            raise ValueError("not the settings of a registry file")
        return cls(horizon, panes)


@functools.lru_cache(maxsize=256)
def _file_settings(text: str) -> FileSettings:
    """``FileSettings`` of ``text``; ``ValueError`` naming the line of a value that is not one."""
    return FileSettings(revision_horizon=_revision_horizon(text), panes=_panes(text))


def _setting(pattern: re.Pattern, text: str, read: Callable[[str], object],
             refusal: Callable[[str, ValueError], str]):
    """What the last line of ``text`` that ``pattern`` matches sets (``read`` of its value), None when no line
    does; ``ValueError`` naming the line with ``refusal`` of a value ``read`` refuses."""
    found = list(pattern.finditer(text))
    if not found:
        return None
    match = found[-1]
    try:
        return read(match.group(1))
    except ValueError as error:
        line = text.count("\n", 0, match.start()) + 1
        raise ValueError(f"line {line}: {refusal(match.group(1), error)}") from None


def _revision_horizon(text: str) -> int | None:
    return _setting(REVISION_HORIZON, text, parse_duration,
                    lambda value, error: f"the revision horizon {value!r} is not a duration such as 30m, 2h or 1d "
                                         f"({error})")


def _panes(text: str) -> str | None:
    return _setting(PANES, text, pane_mode,
                    lambda value, error: "'# csparql panes' takes auto, always (on) or off, "
                                         f"not {repr(value) if value else 'nothing'}")
