#!/usr/bin/env bash
# Shared set-up for the README's commands: check the prerequisites, create or reuse .venv in the repository
# root, and install the project with its pinned dependencies (constraints.txt). Safe to run again: it only
# reinstalls when pyproject.toml or constraints.txt changed. Source it, or run it directly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.csparql-setup"

die() { printf 'csparql setup: %s\n' "$*" >&2; exit 1; }

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

check_java() {
  command -v java >/dev/null 2>&1 || die "Java 17 or newer is needed (Spark runs on it): install a JDK, e.g. 'apt-get install openjdk-17-jdk-headless', and put 'java' on PATH"
  local version
  version="$(java -version 2>&1 | awk -F '"' '/version/ {print $2; exit}')"
  local major="${version%%.*}"
  [ "$major" = "1" ] && major="$(echo "$version" | cut -d. -f2)"
  [ -n "$major" ] && [ "$major" -ge 17 ] 2>/dev/null || die "Java 17 or newer is needed, found '${version:-unknown}': install a JDK 17 (openjdk-17-jdk-headless)"
}

PY="$(find_python)" || die "Python 3.11 or newer is needed: install it (e.g. 'apt-get install python3.11 python3.11-venv') or set PYTHON=/path/to/python3.11"
check_java

if [ ! -x "$VENV/bin/python" ]; then
  echo "csparql setup: creating $VENV with $($PY --version)" >&2
  "$PY" -m venv "$VENV" 2>/dev/null || die "could not create a virtual environment with $PY: install the venv module (e.g. 'apt-get install python3-venv')"
fi

WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "csparql setup: installing pinned dependencies into .venv (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2 || die "could not upgrade pip in .venv (is PyPI reachable?)"
  "$VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" -e "$ROOT[test]" >&2 \
    || die "installing the dependencies failed (see pip's message above)"
  echo "$WANT" > "$STAMP"
fi
# The editable install (and any build in the checkout) leaves plugins/csparql.egg-info beside the package. As
# plugins/ is on the path, Python would find a second csparql distribution there, and Airflow would load the
# plugin twice ("Plugin 'csparql' already registered") in every command: .venv has the metadata already.
rm -rf "$ROOT/plugins/csparql.egg-info"
