#!/usr/bin/env bash
# Run the benchmarks: ./bench.sh --quick (a few minutes) or ./bench.sh --full (hours); --help for the options.
# Sets up .venv (with pinned dependencies) on first use. Writes a run folder under benchmarks/runs/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m benchmarks "$@"
