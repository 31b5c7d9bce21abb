#!/usr/bin/env bash
# Run the test suite. Sets up .venv (with pinned dependencies) on first use. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
