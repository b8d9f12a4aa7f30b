#!/usr/bin/env bash
# Create .venv and install kernelzero with the pinned versions of constraints.txt, once.
# Re-runs the install only when pyproject.toml or constraints.txt changed. Sourced by main.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.kernelzero-setup"
want="$(cat "$root/pyproject.toml" "$root/constraints.txt" | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv (one time; torch CPU build and triton, about 2 minutes)" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -c "$root/constraints.txt" -e "$root[dev,triton,helion,report,hf,service,ray,train,env]"
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"

# The sandbox's uids must run this interpreter and read the venv, its base installation and kernelzero.
source "$root/scripts/sandbox_access.sh"
open_for_sandbox "$venv" "$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')" "$(dirname "$(dirname "$(readlink -f "$venv/bin/python")")")" "$root/src"
