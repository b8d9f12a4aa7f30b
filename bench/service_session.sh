#!/usr/bin/env bash
# The pool's measurements on any GPU machine, one command (repo root; results under ${OUT:-bench/out}):
#   bash bench/service_session.sh [builds] [latency] [probe] [tp1] [tp2] [channel] [ipctest] [stages]
# builds: cold load_inline vs the build recipe; latency: one Triton sample, cold vs standby judge; probe: crash then health probe; tp1/tp2: 300 s mixed
# CUDA + Triton stream on 1 GPU (16 cores) / on 2 GPUs; channel: judge <-> worker transfer of 400 MB;
# ipctest: the CUDA IPC tests; stages: one sample's stage times with CUDA IPC on and off.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out="${OUT:-bench/out}"; mkdir -p "$out"
# First: what this call needs, found or not (bench/preflight.py); a missing need stops it before any work. No step
# reads an earlier call's files: each starts from scratch.
[ "$#" -gt 0 ] || { echo "usage: bash bench/service_session.sh [builds] [latency] [probe] [tp1] [tp2] [channel] [ipctest] [stages]"; exit 2; }
needs=(--name service_session.sh)
gpus=0
for step in "$@"; do
  case "$step" in
    builds|latency|probe|ipctest|stages) [ "$gpus" -ge 1 ] || gpus=1 ;;
    tp1) [ "$gpus" -ge 1 ] || gpus=1; needs+=(--cores 16) ;;  # taskset -c 0-15
    tp2) gpus=2 ;;
    channel) ;;
    *) echo "service_session.sh: unknown step '$step' (steps: builds latency probe tp1 tp2 channel ipctest stages); stopping before any work"; exit 2 ;;
  esac
done
python3 bench/preflight.py "${needs[@]}" --gpus "$gpus" || exit 2
nvidia-smi -L; nproc
for step in "$@"; do
  case "$step" in
    builds) python3 bench/service_bench.py builds --baseline 1 --fast 8 --fast-nosplit 2 --fast-plain 0 --json "$out/builds.json" > "$out/builds.log" 2>&1 ;;
    latency) python3 bench/service_bench.py latency --fixtures 4 --ready-s 8 --skip-cold --json "$out/latency.json" > "$out/latency.log" 2>&1 ;;
    probe) python3 bench/service_bench.py probe --json "$out/probe.json" > "$out/probe.log" 2>&1 ;;
    tp1) taskset -c 0-15 python3 bench/service_bench.py throughput --seconds 300 --gpus 1 --per-gpu 6 --json "$out/tp1.json" > "$out/tp1.log" 2>&1 ;;
    tp2) python3 bench/service_bench.py throughput --seconds 300 --gpus 2 --per-gpu 6 --json "$out/tp2.json" > "$out/tp2.log" 2>&1 ;;
    channel) python3 bench/channel_bench.py | tee "$out/channel.log" ;;
    ipctest) python3 -m pytest -q -m gpu tests/verify/test_cuda_ipc.py -rA -s > "$out/ipctest.log" 2>&1 ;;
    stages) python3 bench/service_bench.py stages --json "$out/stages.json" > "$out/stages.log" 2>&1 ;;
  esac
  tail -c 1500 "$out/$step.log" 2>/dev/null
done
