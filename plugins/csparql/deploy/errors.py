"""The one error of the deployment layer: a registry file, or a query text, that cannot become a DAG."""

from __future__ import annotations

import os


class RegistrationError(Exception):
    """A registry file that cannot become a DAG; ``str()`` names the file and says why."""

    def __init__(self, path: str | os.PathLike, message: str):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message
