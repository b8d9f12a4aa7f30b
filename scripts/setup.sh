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

# The verifier runs candidates and task code in a sandbox, each as a uid of its own (no passwd entry, "other" in
# every permission check; src/kernelzero/verify/sandbox/box.py): those uids must run this interpreter and read the
# venv, its base installation and kernelzero. As root (the sandbox needs root), open the way: execute permission
# for others on every folder above them (a venv under /root: /root gets o+x, nothing in it becomes listable),
# read permission on what is inside. Without this the verifier refuses to run (or needs --unsafe-no-sandbox).
if [ "$(id -u)" = 0 ]; then
  py_real="$(readlink -f "$venv/bin/python")"
  base="$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')"
  for path in "$(readlink -f "$venv")" "$(dirname "$(dirname "$py_real")")" "$(readlink -f "$base")" "$root"; do
    dir="$path"
    while [ "$dir" != "/" ] && [ -n "$dir" ]; do
      find "$dir" -maxdepth 0 ! -perm -o+x -exec chmod o+x {} +
      dir="$(dirname "$dir")"
    done
  done
  for path in "$(readlink -f "$venv")" "$(readlink -f "$base")" "$root/src"; do
    find "$path" \( -type d ! -perm -o+rx -exec chmod o+rx {} + \) -o \( -type f ! -perm -o+r -exec chmod o+r {} + \)
  done
fi
