"""The worker side: the candidate's own process (`python -m kernelzero.verify.worker`).

- `worker.py`: the command loop: import the candidate, construct `ModelNew`, run and time forward calls, reply.
- `guards.py`: in-process first filters (launch counting, the op recorder, the tamper snapshot, output checks).
- `timing.py`: timing primitives (events, host clock, L2 flush), also used by the judge for the reference.
- `warm.py`: a standby worker's warm-up with trusted code.

Everything here runs beside untrusted code, so nothing here decides a verdict. It imports from kernelzero only
this sub-package, the wire (`verify/sandbox/channel.py`, `verify/sandbox/cuda_ipc.py`) and, by name, the worker
hook of the candidate's backend (`verify/backends/<name>/hook.py`).
"""
