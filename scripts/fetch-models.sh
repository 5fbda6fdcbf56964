#!/usr/bin/env sh
# Thin wrapper: run the model/runtime build step from the repo root.
# Usage: scripts/fetch-models.sh [--force | --check] [--out DIR] ...
set -eu
cd "$(dirname "$0")/.."
exec python3 scripts/fetch_models.py "$@"
