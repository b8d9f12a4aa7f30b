#!/usr/bin/env bash
# Lint and format checks (ruff), then the whole CPU test suite (GPU tests skip themselves without a GPU).
# Sets up .venv when needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
ruff check --quiet src tests bench scripts
ruff format --check --quiet src tests bench scripts
exec python -m pytest -q -n "${KZ_TEST_JOBS:-2}" "$@"
