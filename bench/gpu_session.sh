#!/usr/bin/env bash
# One GPU session's measurements (run from the repo root on the GPU machine; no network there).
#   bash bench/gpu_session.sh [tasks] [kb] [fixtures] [cuda1]      results under ${OUT:-bench/out}
# Needs KernelBench's dataset file at .gpu/kernelbench.jsonl (copied from ../shared/data, never committed).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out="${OUT:-bench/out}"; mkdir -p "$out"
# First: what this call needs, found or not (bench/preflight.py); a missing need stops it before any work.
[ "$#" -gt 0 ] || { echo "usage: bash bench/gpu_session.sh [tasks] [kb] [fixtures] [cuda1]"; exit 2; }
needs=(--name gpu_session.sh --gpus 1)
for step in "$@"; do
  case "$step" in
    tasks|fixtures) ;;
    kb|cuda1) needs+=(--file .gpu/kernelbench.jsonl
                      "KernelBench's dataset for '$step': cp ../shared/data/kernelbench.jsonl .gpu/ here, carry .gpu") ;;
    *) echo "gpu_session.sh: unknown step '$step' (steps: tasks kb fixtures cuda1); stopping before any work"; exit 2 ;;
  esac
done
python3 bench/preflight.py "${needs[@]}" || exit 2
python3 -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())'
id nobody; python3 - <<'PY'
from kernelzero.verify.sandbox.process import plan_sandbox
p = plan_sandbox("nobody", True); print("sandbox plan: uid", p.uid, "netns", p.netns, p.notes)
PY
for step in "$@"; do
  case "$step" in
    tasks) python3 bench/tasks_eager.py kz-basic --out "$out/tasks_kz_basic.md" 2>&1 | tail -60 ;;
    kb) python3 bench/verify_kernelbench.py .gpu/kernelbench.jsonl --out "$out/verify_kb.md" 2>&1 | tail -20 ;;
    fixtures) python3 -m pytest -q -m gpu -n "$(nproc)" tests/verify/test_fixtures.py -rA 2>&1 | tee "$out/fixtures.log" | tail -60 ;;
    cuda1) for f in tests/kernels/correct/cuda_relu.py tests/kernels/wrong/cuda_relu_compile_error.py; do
             python3 -m kernelzero verify .gpu/kernelbench.jsonl:level1/19_ReLU "$f" --backend cuda --scale 0.25 --json > "$out/$(basename $f .py).json" 2>&1; python3 -c "import json,sys; v=json.load(open('$out/$(basename $f .py).json')); print('$f', v['status'], v['message'][:150], v['stage_seconds'])"; done ;;
  esac
done
