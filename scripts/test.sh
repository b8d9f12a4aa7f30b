#!/usr/bin/env bash
# The whole CPU test suite (GPU tests skip themselves without a GPU). Sets up .venv when needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec python -m pytest -q -n "${KZ_TEST_JOBS:-2}" "$@"
