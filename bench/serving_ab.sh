#!/usr/bin/env bash
# An A/B of the reward step on the GPU (issue 26 item 3), in one device call right after a green gate on the same
# machine (carry [".gpu"], timeout_s 600): bench/reward_step.py, two steps per variant, one variant after the other.
#   bash bench/serving_ab.sh COMMIT [VARIANT ...]
# A variant is a comma-separated list of `serves=N` (requests a judge serves: verify/judge/serving.py, default 8),
# `per_gpu=N` (verifications in flight per GPU, default the config's), `timed_pass=one_pass` (reward.timed_pass) and VAR=value settings for the run, e.g. "serves=8,KZ_PREDRAW=1,KZ_TRITON_SEED=1" "serves=8" (the opt-ins against the
# default). Without variants: "serves=8" "serves=1" (the serving judges' A/B of the sixteenth session).
# Each run is bounded (KZ_AB_RUN_S, default 260 s) and writes its rows as it goes; the verdict logs count the
# verifications served by a kept reference. Everything comes back in $OUT/serving_ab.tgz and a summary on stdout.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
commit="${1:?usage: bash bench/serving_ab.sh COMMIT}"
out="${OUT:?set OUT, the result folder of the device call}"
site="${KZ_GATE_SITE:-/tmp/kz-gate-site}"
if [ ! -d "$site" ]; then  # a fresh machine: the gate's wheels again (it installed them on a warm one)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .gpu/wheels/*.whl || exit 2
  source scripts/sandbox_access.sh
  open_for_sandbox "$site" "$(pwd)/src" "$(python3 -c 'import sys; print(sys.base_prefix)')"
fi
export PYTHONPATH="$site:src" KZ_GIT_COMMIT="$commit" PYTHONUNBUFFERED=1
raw="$(mktemp -d)"
variants=("${@:2}")
[ ${#variants[@]} -eq 0 ] && variants=("serves=8" "serves=1")
for variant in "${variants[@]}"; do
  serves=8
  per_gpu=()
  extra=()
  settings=()
  IFS=',' read -ra parts <<< "$variant"
  for part in "${parts[@]}"; do
    case "$part" in
      serves=*) serves="${part#serves=}" ;;
      per_gpu=*) per_gpu=(--per-gpu "${part#per_gpu=}") ;;
      timed_pass=*) extra+=(--timed-pass "${part#timed_pass=}") ;;
      *=*) settings+=("$part") ;;
      *) echo "not a setting: $part (in $variant)"; exit 2 ;;
    esac
  done
  name="${variant//[^A-Za-z0-9_]/_}"
  env "${settings[@]}" KZ_VERDICT_LOG="$raw/verdicts_$name.jsonl" timeout -k 10 "${KZ_AB_RUN_S:-260}" \
    python3 bench/reward_step.py --steps 2 --serves "$serves" "${per_gpu[@]}" "${extra[@]}" --out "$raw/$name" > "$raw/$name.log" 2>&1
  echo "$variant: exit $? at $SECONDS s"
  tail -4 "$raw/$name.log"
  kept=$(grep -c "reference process was kept" "$raw/verdicts_$name.jsonl" 2>/dev/null)
  echo "$variant: $(wc -l < "$raw/verdicts_$name.jsonl" 2>/dev/null) verdicts, $kept on a kept reference"
done
tar czf "$out/serving_ab.tgz" -C "$raw" . && rm -rf "$raw"
