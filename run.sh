#!/usr/bin/env bash
# Run the main job on the embedded default. Sets up .venv (with pinned dependencies) on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/csparql" demo "$@"
