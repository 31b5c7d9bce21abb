"""``python -m csparql.cli``: the ``csparql`` command, for an environment without its console script."""

import sys

from csparql.cli import main

sys.exit(main())
