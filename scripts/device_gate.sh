#!/usr/bin/env bash
# One device call of the GPU gate, as the `device` tool runs it: carry [".gpu"], timeout_s 600 (or, where .gpu/ holds
# the miniature's states too, carry [".gpu/wheels", ".gpu/tools", ".gpu/kernelbench.jsonl"]: a call carries 64 MiB).
#   bash scripts/device_gate.sh COMMIT [RESUME_TABLE]
# Prepare here first (network): `bash scripts/gpu_wheels.sh` (the wheels into .gpu/wheels) and
# `cp ../shared/data/kernelbench.jsonl .gpu/` (for the panel and the benches; .gpu is ignored by git).
# It runs scripts/gpu_tests.sh with KZ_GATE_WALL_S (default 530 s: at 570 s a call on 2026-12-04 outran the tool's
# 600 s with the gate's teardown and brought nothing back) and packs every result file into $OUT/gate.tgz beside a
# copy of gpu_table.md (a call brings back at most 8 files). COMMIT is recorded in the table (the device's copy of
# the tree has no .git). A gate cut by its wall goes on in the next call, at once, on the same commit:
#   mkdir -p .gpu && cp <files_at>/gpu_table.md .gpu/resume_COMMIT.md      # here, between the calls
#   bash scripts/device_gate.sh COMMIT .gpu/resume_COMMIT.md               # the next call (about 60-100 s)
# Other variables pass through (KZ_STANDBY_SERVES=8 gates the serving judges: verify/judge/turns.py).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
commit="${1:?usage: bash scripts/device_gate.sh COMMIT [RESUME_TABLE]}"
export KZ_GIT_COMMIT="$commit" KZ_GATE_WALL_S="${KZ_GATE_WALL_S:-530}"
[ -n "${2:-}" ] && export KZ_GATE_RESUME="$2"
out="${OUT:?set OUT, the result folder of the device call}"
raw="$(mktemp -d)"
OUT="$raw" bash scripts/gpu_tests.sh
rc=$?
cp "$raw/gpu_table.md" "$out/gpu_table.md" 2>/dev/null
# The failures last, where the device tool's reply (its output's last 12,000 characters) shows them even if the files
# never get read: each failed or erred row, pytest's short summary, and the head of each failure's record.
echo "== failed rows"; grep -E "^\| .* \| (failed|error)" "$raw/gpu_table.md" 2>/dev/null | cut -c1-300 | head -n 40
echo "== pytest summary"; grep -hE "^(FAILED|ERROR) " "$raw"/gpu_tests*.log 2>/dev/null | cut -c1-400 | head -n 40
echo "== failure records"; grep -E "^(#|E |>)" "$raw/gpu_table_failures.md" 2>/dev/null | cut -c1-300 | head -n 80
tar czf "$out/gate.tgz" -C "$raw" . && rm -rf "$raw"
echo "device_gate.sh: commit $commit, exit $rc (0 green, 1 a failure, 2 wheels, 124 cut by the wall), $SECONDS s"
exit "$rc"
