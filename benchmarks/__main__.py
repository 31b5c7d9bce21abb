"""``python -m benchmarks`` (what ``./bench.sh`` runs): see ``benchmarks/README.md``."""

import sys

from benchmarks.cli import main

sys.exit(main())
