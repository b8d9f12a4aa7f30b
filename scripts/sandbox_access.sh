# Sourced by setup.sh and gpu_tests.sh. The verifier runs candidates and task code in a sandbox, each as a uid of
# its own (no passwd entry: "other" in every permission check; src/kernelzero/verify/sandbox/box.py). Those uids must
# run the interpreter and read its packages and kernelzero. `open_for_sandbox DIR...` (as root, which the sandbox
# needs anyway): execute permission for others on every folder above each DIR (a checkout or venv under /root: /root
# gets o+x, nothing in it becomes listable), read (and for folders, execute) permission on what is inside each DIR.
# Without this the verifier refuses to run (or needs --unsafe-no-sandbox).
open_for_sandbox() {
  [ "$(id -u)" = 0 ] || return 0
  local path dir
  for path in "$@"; do
    path="$(readlink -f "$path")"
    [ -e "$path" ] || continue
    dir="$(dirname "$path")"
    while [ "$dir" != "/" ] && [ -n "$dir" ]; do
      find "$dir" -maxdepth 0 ! -perm -o+x -exec chmod o+x {} +
      dir="$(dirname "$dir")"
    done
    find "$path" \( -type d ! -perm -o+rx -exec chmod o+rx {} + \) -o \( -type f ! -perm -o+r -exec chmod o+r {} + \)
  done
}
