#!/usr/bin/env bash
# The main job: evaluate the bundled replay completions on kz-basic (smoke sizes on CPU, Triton
# through the interpreter; bench sizes on a GPU) and print the metrics table. Sets up .venv when needed.
# Extra arguments go to `kernelzero eval` (e.g. --out runs/other).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
if python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  sizes=()   # bench sizes on a GPU
else
  sizes=(--preset smoke)
fi
exec kernelzero eval kz-basic "${sizes[@]}" -n 2 --backend triton --out runs/main "$@"
