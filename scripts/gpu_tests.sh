#!/usr/bin/env bash
# Every GPU test and every fixture on one GPU machine, within 10 minutes, side by side; prints a table.
# Run after every verifier change (from the repository root, on the GPU machine; no network needed):
#   bash scripts/gpu_tests.sh                 # results under ${OUT:-bench/out}
# Tests run 8 at a time (pytest-xdist; `.gpu/wheels` is installed first when present, for machines without it):
# the GPU lease lets samples share the GPU for their checks and serialises only timing. Fixture timing uses a
# short budget (KZ_TIMING_BUDGET_S, default 0.05 s per side); the speedup-spread benchmark is bench/spread_bench.py.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH=src PYTHONUNBUFFERED=1 KZ_TIMING_BUDGET_S="${KZ_TIMING_BUDGET_S:-0.05}"
out="${OUT:-bench/out}"; mkdir -p "$out"
if [ -d .gpu/wheels ]; then python3 -m pip install -q --no-index --no-deps .gpu/wheels/*.whl 2>&1 | tail -2; fi
python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
start=$(date +%s)
python3 -m pytest -q -m gpu -n "${KZ_TEST_JOBS:-8}" tests -p no:cacheprovider -rA \
  --deselect tests/verify/test_fixtures.py::test_all_fixtures_gpu --junitxml "$out/gpu_tests.xml" > "$out/gpu_tests.log" 2>&1
tests_rc=$?
mid=$(date +%s)
KZ_GPU_WORKERS="${KZ_GPU_WORKERS:-8}" python3 -m pytest -q -m gpu tests/verify/test_fixtures.py::test_all_fixtures_gpu \
  -p no:cacheprovider -s > "$out/fixtures.log" 2>&1
fixtures_rc=$?
end=$(date +%s)
python3 - "$out" "$tests_rc" "$fixtures_rc" $((mid - start)) $((end - mid)) <<'PY'
import re, sys
import xml.etree.ElementTree as ET
out, tests_rc, fixtures_rc, t1, t2 = sys.argv[1:]
root = ET.parse(f"{out}/gpu_tests.xml").getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
print(f"| part | result | seconds |\n|---|---|---|")
print(f"| GPU tests (-m gpu) | {counts['tests']} run, {counts['failures']} failed, {counts['errors']} errors, "
      f"{counts['skipped']} skipped (rc {tests_rc}) | {t1} |")
lines = open(f"{out}/fixtures.log").read().splitlines()
ok = sum(1 for l in lines if l.startswith("ok "))
bad = [l for l in lines if l.startswith("BAD")]
print(f"| fixtures (test_all_fixtures_gpu) | {ok} as expected, {len(bad)} not (rc {fixtures_rc}) | {t2} |")
for case in suite.iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
        print(f"FAILED {case.get('classname')}::{case.get('name')}")
for l in bad:
    print(l)
PY
