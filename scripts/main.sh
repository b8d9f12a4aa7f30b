#!/usr/bin/env bash
# The main job as it stands: check every task of the built-in suite kz-basic at smoke sizes
# (contract, degenerate outputs). Sets up .venv when needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec kernelzero tasks check kz-basic --preset smoke --strict --jobs 2 "$@"
