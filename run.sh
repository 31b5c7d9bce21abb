#!/usr/bin/env bash
# Run the main job on the embedded default: Airflow with local Spark and the example queries (Ctrl-C stops it).
# Sets up .venv (with pinned dependencies) on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/csparql" stack "$@"
