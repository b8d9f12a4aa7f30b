#!/usr/bin/env bash
# The serving judges' A/B on the GPU (issue 26 item 3), in one device call right after a green gate on the same
# machine (carry [".gpu"], timeout_s 600): the reward step of bench/reward_step.py, two steps with judges that serve
# 8 requests each (`--serves 8`: verify/judge/serving.py), then two with one-request judges (the default).
#   bash bench/serving_ab.sh COMMIT
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
for serves in 8 1; do
  KZ_VERDICT_LOG="$raw/verdicts_serves$serves.jsonl" timeout -k 10 "${KZ_AB_RUN_S:-260}" \
    python3 bench/reward_step.py --steps 2 --serves "$serves" --out "$raw/serves$serves" > "$raw/serves$serves.log" 2>&1
  echo "serves=$serves: exit $? at $SECONDS s"
  tail -4 "$raw/serves$serves.log"
  kept=$(grep -c "reference process was kept" "$raw/verdicts_serves$serves.jsonl" 2>/dev/null)
  echo "serves=$serves: $(wc -l < "$raw/verdicts_serves$serves.jsonl" 2>/dev/null) verdicts, $kept on a kept reference"
done
tar czf "$out/serving_ab.tgz" -C "$raw" . && rm -rf "$raw"
