"""``python -m csparql.cli``: the ``csparql`` command, for an environment without its console script."""

from csparql.cli import entry_point

entry_point()
