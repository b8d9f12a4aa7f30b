#!/usr/bin/env bash
# The GPU gate: every `gpu` test, every fixture (one test each), and the service, Ray and Helion tests, in ONE pytest
# run on the GPU machine, side by side, the whole script within KZ_GATE_WALL_S (default 470 s; ends by 480 s).
# Run after every verifier change, from the repository root:
#   bash scripts/gpu_wheels.sh      # here, with network: the wheels of scripts/gpu_wheels.txt into .gpu/wheels
#   bash scripts/gpu_tests.sh       # on the GPU machine, in a device call that carries `.gpu` (no network there)
# Results under ${OUT:-bench/out}: gpu_table.md (one row per finished test, written as it goes, then a summary; a run
# cut by the wall limit keeps its rows), gpu_table_failures.md (each failure in full), gpu_verdicts.jsonl (every
# verdict with its stage times), gpu_monitor.log (memory, processes and the lease ledger every 20 s), gpu_tests.log
# (the main phase's pytest output), gpu_tests_exclusive.log (the exclusive phase's), gpu_wheels_check.txt.
# First seconds: the wheels are installed into KZ_GATE_SITE (default /tmp/kz-gate-site, put first on PYTHONPATH)
# and every listed package must import at its version, else the script stops naming it (exit 2, about 15 s in).
# Two phases: the `gpu_exclusive` tests alone, then the rest side by side, longest first (scripts/gpu_table.py); the
# second's pytest starts with the first and waits for it before its first test.
# Knobs: KZ_TEST_JOBS (xdist workers, default 8: GPU memory is divided by the verifier's memory lease, which every
# verification waits for; the worker count bounds the processes on the GPU, about six per worker with its standby
# judge. On the H200 at 585db01, 16 workers kept about 95 processes on the GPU, a CUDA context took a median 11 s to
# make and 127 tests finished in the main phase; 8 workers finished 340 of 343 in the same 313 s), KZ_TEST_TIMEOUT_S (per test, default 240, pytest-timeout),
# KZ_GPU_TEST_MAX_INPUT_MIB, KZ_STANDBY and KZ_GATE_EXCL_S (the exclusive phase's limit; see below), KZ_GATE_ARGS (more pytest arguments, split on spaces:
# `-k cheat_rejected` for a part of the gate, `-k (a)or(b)` for several; a part is a
# diagnosis, never the gate), KZ_GATE_RESUME (a gpu_table.md of an earlier run on the same commit: the tests it shows
# passed are left out, so a gate cut by the wall limit goes on in the next call; a diagnosis too), KZ_TIMING_BUDGET_S (fixture timing per side, default 0.05 s; the speedup spread is bench/spread_bench.py).
# Exit: 0 all passed; 1 a test failed or was skipped for a missing package; 2 a wheel missing or wrong; 124 the wall
# limit stopped the run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-bench/out}"; mkdir -p "$out"
table="$out/gpu_table.md"; rm -f "$table"
site="${KZ_GATE_SITE:-/tmp/kz-gate-site}"
wall="${KZ_GATE_WALL_S:-470}"
export PYTHONUNBUFFERED=1 KZ_TIMING_BUDGET_S="${KZ_TIMING_BUDGET_S:-0.05}" PYTHONPATH="$site:src"
export KZ_VERDICT_LOG="$out/gpu_verdicts.jsonl"  # every verify() verdict, stage times included (verify/api.py)
# One input set of a fixture's or cheat's task at most this large (tests/verify/fixtures.py gpu_sized): at bench sizes
# 16 verifications side by side waited a median 73 s for GPU memory (H200, 2026-12-02); 0 keeps the bench sizes.
export KZ_GPU_TEST_MAX_INPUT_MIB="${KZ_GPU_TEST_MAX_INPUT_MIB:-32}"
[ "$KZ_GPU_TEST_MAX_INPUT_MIB" = 0 ] && unset KZ_GPU_TEST_MAX_INPUT_MIB
# One solo-reference timing per task for the whole run (tests/verify/fixtures.py gate_options): timing the reference
# alone holds the whole GPU, and at 740daf5 it was 343 s of 2,330 s of verification, plus the waits it caused.
export KZ_GPU_TEST_BASELINES="${KZ_GPU_TEST_BASELINES:-/tmp/kz-gate-baselines}"
# Each test worker keeps one judge started ahead (verify/api.py own_standby): its start, imports, CUDA contexts and
# IPC check overlap the worker's current verification instead of coming before its next (0: every judge cold).
export KZ_STANDBY="${KZ_STANDBY:-1}"
rm -rf "$KZ_GPU_TEST_BASELINES"
rm -f "$KZ_VERDICT_LOG"
export KZ_GIT_COMMIT="${KZ_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"

echo "GPU gate at commit $KZ_GIT_COMMIT: wheels from .gpu/wheels (scripts/gpu_wheels.txt)"
python3 scripts/gpu_wheels.py files .gpu/wheels || exit 2
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .gpu/wheels/*.whl || exit 2
if ls .gpu/tools/py_spy-*.whl >/dev/null 2>&1; then  # optional: the monitor's stacks of the GPU lease's holders
  python3 -m pip install -q --no-index --no-deps --target /tmp/kz-gate-tools .gpu/tools/py_spy-*.whl && export PATH="$PATH:/tmp/kz-gate-tools/bin"
fi
source scripts/sandbox_access.sh  # the sandbox's uids must run python3 and read the wheels and the checkout
open_for_sandbox "$site" "$(pwd)/src" "$(python3 -c 'import sys; print(sys.base_prefix)')"
# Every listed package must import at its version (helion imports torch: 10-15 s): checked beside the exclusive
# phase, which it stops at once when it fails (exit 2). No CUDA here: that phase accounts for every byte of the GPU.
python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton",
  triton.__version__)' > "$out/gpu_wheels_check.txt" 2>&1
python3 scripts/gpu_wheels.py check >> "$out/gpu_wheels_check.txt" 2>&1 & check_pid=$!
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/GPU: /'
echo "set up in $SECONDS s"

# A monitor, every 20 s until the script ends: GPU memory and use, compute processes, and the memory ledger's entries
# (verify/judge/memory.py), so a run that jams says where the memory went ($out/gpu_monitor.log).
monitor() {
  while sleep 20; do
    printf '== %s (+%s s)\n' "$(date +%T)" "$SECONDS"
    nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu --format=csv,noheader 2>&1
    # each compute process as pid:MiB:parent:role (judge, ref, cand, pytest or the command's first words)
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>&1 | while IFS=', ' read -r pid mib; do
      args=$(ps -o args= -p "$pid" 2>/dev/null); parent=$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')
      case "$args" in
        *judge.launch*) role=judge ;; *verify.worker*reference*) role=ref ;; *verify.worker*) role=cand ;;
        *pytest*|*xdist*) role=pytest ;; *) role=$(echo "$args" | cut -c1-40 | tr ' ' '_') ;;
      esac
      printf '%s:%s:%s:%s ' "$pid" "$mib" "$parent" "$role"
    done; echo
    for d in /tmp/kernelzero-gpu-locks/*.mem; do
      [ -d "$d" ] || continue
      for f in "$d"/* "$d"/.base*; do [ -f "$f" ] && printf '%s=%s ' "${f##*/}" "$(head -c 20 "$f")"; done; echo
    done
    printf 'load %s; pytest/judge processes %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(pgrep -fc 'kernelzero|pytest')"
    python3 scripts/gate_locks.py --stacks  # the GPU lease's holders and waiters (their stacks where py-spy is carried)
  done >> "$out/gpu_monitor.log" 2>&1
}
monitor & monitor_pid=$!
trap 'kill "$monitor_pid" 2>/dev/null' EXIT

# The tests: every file with a `gpu` test (only those tests), and all of the service, Ray and Helion tests.
mapfile -t paths < <( (grep -rlE "mark\.gpu" tests --include='test_*.py'; ls tests/verify/test_helion_*.py) | sort -u)
gate_all=(--gate-all tests/service)
for f in tests/verify/test_helion_*.py; do gate_all+=(--gate-all "$f"); done
# KZ_GATE_RESUME: leave out what an earlier run's table shows passed (scripts/gpu_table.py --gate-resume)
resume=()
if [ -n "${KZ_GATE_RESUME:-}" ]; then
  [ -f "$KZ_GATE_RESUME" ] || { echo "KZ_GATE_RESUME: no such table: $KZ_GATE_RESUME"; exit 2; }
  resume=(--gate-resume "$KZ_GATE_RESUME")
  echo "resuming: the tests passed in $KZ_GATE_RESUME are left out ($(grep -c ' | passed | ' "$KZ_GATE_RESUME") rows)" |
    tee -a "$table"
fi
# First, the tests marked gpu_exclusive: they hold GPU memory outside the leases (a foreign tenant) or most of the
# GPU (8 x 20 GB), so they run alone, one at a time, without standby judges, in at most KZ_GATE_EXCL_S seconds
# (default 100; 0 leaves them out; they took 54-80 s on the H200). First, not last: the main phase then has every
# second that is left instead of a guess at what this phase needs (at a451387 the reserve was 80 s and the
# phase was cut at 75 s).
excl=$(grep -c "mark.gpu_exclusive" tests/verify/test_memory_lease.py)  # marked functions
excl_s="${KZ_GATE_EXCL_S:-100}"
excl_rc=0
if [ "$excl" -gt 0 ] && [ "$excl_s" -gt 0 ]; then
  echo "exclusive phase: the tests marked gpu_exclusive, one at a time, at most $excl_s s"
  KZ_STANDBY=0 PYTHONPATH="$PYTHONPATH:scripts" timeout -k 5 "$excl_s" python3 -m pytest -p gpu_table \
    -p no:cacheprovider -q -rfE -p no:xdist -m gpu_exclusive --timeout "${KZ_TEST_TIMEOUT_S:-240}" \
    --gpu-table "$table" "${resume[@]}" ${KZ_GATE_ARGS:-} "${paths[@]}" > "$out/gpu_tests_exclusive.log" 2>&1 &
  excl_pid=$!
fi
# Then the rest, side by side, longest first (scripts/gate_durations.json: refresh it from a gate's table with
# `python3 scripts/gpu_table.py durations TABLE > scripts/gate_durations.json`), in every second that is left. Its
# pytest starts now (workers, imports, collection, the fork server: about 15 s) and runs no test before the
# exclusive phase has ended (`--gate-wait-for`).
go="$out/.gate_main_go"; rm -f "$go"
[ -z "${excl_pid:-}" ] && touch "$go"
jobs="${KZ_TEST_JOBS:-8}"
left=$((wall - SECONDS))
echo "main phase: ${#paths[@]} files + tests/service, $jobs workers, ${KZ_TEST_TIMEOUT_S:-240} s a test, until" \
  "$wall s; table: $table"
PYTHONPATH="$PYTHONPATH:scripts" timeout -k 5 "$left" python3 -m pytest -p gpu_table \
  -p no:cacheprovider -q -rfE -n "$jobs" --timeout "${KZ_TEST_TIMEOUT_S:-240}" \
  --timeout-method "${KZ_TEST_TIMEOUT_METHOD:-signal}" -m "not gpu_exclusive" --gate-wait-for "$go" \
  --gpu-table "$table" --gate-durations scripts/gate_durations.json "${gate_all[@]}" "${resume[@]}" \
  ${KZ_GATE_ARGS:-} "${paths[@]}" tests/service > "$out/gpu_tests.log" 2>&1 &
main_pid=$!
wait "$check_pid"; check_rc=$?
cat "$out/gpu_wheels_check.txt"
if [ "$check_rc" -ne 0 ]; then
  for pid in ${excl_pid:-} "$main_pid"; do kill -TERM "$pid" 2>/dev/null; done
  wait ${excl_pid:-} "$main_pid"
  echo "GPU gate: stopped, a listed package is missing or wrong (above); carry .gpu/wheels (scripts/gpu_wheels.sh)"
  exit 2
fi
if [ -n "${excl_pid:-}" ]; then
  wait "$excl_pid"; excl_rc=$?
  [ "$excl_rc" -eq 5 ] && excl_rc=0  # pytest's "no tests collected": a part (-k, a resume) selected none of them
  echo "exclusive phase: exit $excl_rc at $SECONDS s"
  touch "$go"
fi
wait "$main_pid"; rc=$?
echo "main phase: exit $rc at $SECONDS s"
if [ "$rc" -eq 0 ] || [ "$excl_rc" -eq 124 ] || [ "$excl_rc" -eq 137 ]; then rc=$excl_rc; fi
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  printf '\n**Stopped by the wall limit (%s s) after %s s**: the rows above are the tests that finished.\n' \
    "$wall" "$SECONDS" >> "$table"
  rc=124
fi
if grep -q "| skipped (missing package) |" "$table" && [ "$rc" -eq 0 ]; then rc=1; fi
python3 scripts/gate_stages.py "$KZ_VERDICT_LOG" >> "$table"  # where the verifications' time went
grep -vE "^\| .* \| passed \| " "$table" | tail -n 60
echo "GPU gate: exit $rc after $SECONDS s (full table: $table, log: $out/gpu_tests.log)"
exit "$rc"
