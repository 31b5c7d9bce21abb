#!/usr/bin/env bash
# Run the main job, the embedded stack: Airflow and one Spark Connect server that every evaluation and ingest
# runs on, with the example queries (`csparql stack`; Ctrl-C stops it).
# Sets up .venv (with pinned dependencies) on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/csparql" stack "$@"
