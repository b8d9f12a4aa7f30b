"""Where a verification's GPU memory goes: named fixtures verified one at a time, each role's high-water mark per
command and, with --trace, the memory after every reply of the reference (judge.Judge._gpu_peaks, KZ_GPU_TRACE).

    PYTHONPATH=src python3 scripts/gpu_memory_trace.py [--trace] correct/triton_leaky_relu correct/triton_sum_dim

Run on a GPU machine from the repository root; the numbers calibrate the memory lease (verify/judge/memory.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "verify"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixtures", nargs="+", help="fixture names, e.g. correct/triton_leaky_relu")
    parser.add_argument("--trace", action="store_true", help="also the memory after every reply (KZ_GPU_TRACE)")
    args = parser.parse_args()
    if args.trace:
        os.environ["KZ_GPU_TRACE"] = "1"
    import fixtures as fx

    from kernelzero.verify import verify

    known = {f.name: f for f in fx.load_fixtures()}
    missing = [name for name in args.fixtures if name not in known]
    if missing:
        print(f"no such fixture: {', '.join(missing)}", file=sys.stderr)
        return 2
    for name in args.fixtures:
        f = known[name]
        start = time.monotonic()
        v = verify(f.task(), f.source, f.backend, f.verify_options(device="cuda", timing_budget_s=0.05))
        s = v.stage_seconds
        print(f"{name}: {v.status} in {time.monotonic() - start:.1f} s {v.message[:200]}", flush=True)
        print(f"  lease {s.get('gpu_mem_gib')} GiB (need {s.get('gpu_need_gib')}), waited {s.get('gpu_mem_wait')} s")
        print("  peaks (GiB)", {k.removeprefix("gpu_peak_gib_"): s[k] for k in sorted(s) if k.startswith("gpu_peak")})
        for note in v.notes:
            if note.startswith("GPU memory"):
                print("  " + note[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
