#!/usr/bin/env bash
# Multi-turn evaluation and `kernelzero optimize` on a GPU with the bundled replay candidates (repo root; no network
# needed; results under ${OUT:-bench/out}; bench/optimize.md records a run):
#   bash bench/optimize_gpu.sh [multiturn] [optimize] [resume]
# multiturn: `kernelzero eval --turns 3` over src/kernelzero/data/multiturn_replay.jsonl (3 tasks x 2 episodes, full
#            sizes): each episode's turns and the per-turn table (pass@1, fast_1 after t turns);
# optimize:  `kernelzero optimize` of kz-basic's GELU (8192 x 16384) over src/kernelzero/data/optimize_replay.jsonl
#            (budget 8, 2 turns): the hard-coded-size kernels must be rejected at double the size, the slow
#            two-pass kernel must lose to the fastest general one; report.md and 21_GELU_optimized.py;
# resume:    the optimize command again: it must verify nothing (the seconds it takes are printed).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out="${OUT:-bench/out}"; mkdir -p "$out"
# First: what this call needs, found or not (bench/preflight.py); a missing need stops it before any work.
# `resume` needs the run folder of an `optimize` step: earlier in this call, or carried from an earlier call.
[ "$#" -gt 0 ] || { echo "usage: bash bench/optimize_gpu.sh [multiturn] [optimize] [resume]"; exit 2; }
needs=(--name optimize_gpu.sh --gpus 1)
optimized=""
for step in "$@"; do
  case "$step" in
    multiturn) ;;
    optimize) optimized=1 ;;
    resume) [ -n "$optimized" ] || needs+=(--dir "$out/optimize_gelu"
              "the run of an earlier 'optimize' step (call 'optimize resume' together, or carry $out)") ;;
    *) echo "optimize_gpu.sh: unknown step '$step' (steps: multiturn optimize resume); stopping before any work"; exit 2 ;;
  esac
done
python3 bench/preflight.py "${needs[@]}" || exit 2
nvidia-smi -L; python3 -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)'
gelu=src/kernelzero/tasks/suites/kz_basic/level1/21_GELU.py
optimize=(python3 -m kernelzero optimize "$gelu" --model replay:src/kernelzero/data/optimize_replay.jsonl
          --backend triton --budget 8 --turns 2 --out "$out/optimize_gelu")
for step in "$@"; do
  case "$step" in
    multiturn)
      rm -rf "$out/multiturn"
      start=$SECONDS
      python3 -m kernelzero eval kz-basic --model replay:src/kernelzero/data/multiturn_replay.jsonl \
        --backend triton -n 2 --turns 3 --out "$out/multiturn" --no-store --compile-baseline > "$out/multiturn.log" 2>&1
      echo "wall: $((SECONDS - start)) s" >> "$out/multiturn.log"
      [ -f "$out/multiturn/verdicts.jsonl" ] || echo "multiturn: no verdicts.jsonl (the eval failed: see above)" >> "$out/multiturn.log"
      [ -f "$out/multiturn/verdicts.jsonl" ] && python3 - "$out/multiturn" <<'PY' >> "$out/multiturn.log"
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
for line in (run / "verdicts.jsonl").read_text().splitlines():
    r = json.loads(line); v = r["verdict"]
    print(r["task"], "sample", r["sample_idx"], "turn", r["turn"], v["status"], v.get("speedup_eager"), v.get("speedup_compile"))
print(json.dumps(json.loads((run / "metrics.json").read_text())["per_turn"], indent=1))
PY
      ;;
    optimize)
      rm -rf "$out/optimize_gelu"
      start=$SECONDS; "${optimize[@]}" > "$out/optimize.log" 2>&1; echo "wall: $((SECONDS - start)) s" >> "$out/optimize.log"
      cat "$out/optimize_gelu/report.md" >> "$out/optimize.log" 2>&1 || echo "optimize: no report.md (see above)" >> "$out/optimize.log" ;;
    resume)
      start=$SECONDS; "${optimize[@]}" > "$out/resume.log" 2>&1; echo "wall: $((SECONDS - start)) s" >> "$out/resume.log" ;;
  esac
  tail -c 4000 "$out/$step.log" 2>/dev/null
done
