"""The judge side of a verification: the trusted process and what it owns.

- `run.py`: the caller's side, `run_judge()`: start a judge process (or take a standby one) and read its result.
- `launch.py`: the judge process's entry (`python -m kernelzero.verify.judge.launch`); starts the worker first.
- `judge.py`: `Judge`: one verification's run: the worker's stages, the correctness trials, the verdict.
- `reference.py`: the task's `Model`, its input draws from the secret seed, the expected outputs.
- `anticheat.py`: how the worker's first-filter report (launches, PyTorch ops, tampering) is read.
- `timing_stage.py`: the timed calls of a correct candidate (their outputs checked too), the reference's timings
  and their per-GPU cache, speedups.
- `compare.py`: output comparison and the input-mutation check.
- `lease.py`: the per-GPU readers-writer lease (checks share a GPU, timing takes it alone).
- `probe.py`: the GPU health probe after a crash (in a fresh process).
- `standby.py`: judges started ahead of requests, warmed with trusted code only.

Nothing here imports candidate code; the candidate runs in the worker (`verify/worker/`) inside the sandbox
(`verify/sandbox/`).
"""
