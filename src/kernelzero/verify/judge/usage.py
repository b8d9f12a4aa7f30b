"""What a verification's processes used, for its verdict's `stage_seconds` (a diagnosis of throughput and of the
memory lease; nothing is decided from it: a worker's process writes its own numbers).

`gpu_peaks(judge, started)`: GiB high-water marks on the GPU, each worker's per command and the judge's own;
`cpu_seconds_of(judge, started)`: CPU seconds of the judge and of each worker, per command. Both count this request
only: a serving judge (judge/serving.py) resets its own counters and those of a kept reference between requests
(`new_request`), so a second request's verdict does not carry the first's.
"""

from __future__ import annotations

import os
import sys

import torch

from kernelzero.verify.judge.memory import GIB
from kernelzero.verify.sandbox import cuda_ipc
from kernelzero.verify.sandbox.channel import cpu_seconds

BASE = {"cpu_s": 0.0}  # the judge's CPU seconds when its current request came (0: its first, counted from its start)


def new_request(workers=()) -> None:
    """Count from now: the judge's CPU base, its IPC seconds, its GPU memory peak, and each kept worker's counters."""
    BASE["cpu_s"] = cpu_seconds()
    cuda_ipc.SECONDS.clear()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()
    for worker in workers:
        worker.gpu_peaks, worker.gpu_trace, worker.ipc_s, worker.cpu_by_cmd = {}, [], {}, {}


def gpu_peaks(judge, started) -> tuple[dict[str, float], list[str]]:
    """GiB high-water marks on the GPU: each worker's per command (`gpu_peak_gib_ref_draw`, ..., as reported,
    channel._gpu_peak) and the judge's own, and notes: when they pass the lease, and with KZ_GPU_TRACE each
    reply's (command, allocated, reserved, export) GiB in order."""
    peaks, notes, used = {}, [], 0.0
    if judge.device == "cuda" and torch.cuda.is_initialized():
        used = peaks["gpu_peak_gib_judge"] = round(torch.cuda.max_memory_reserved() / GIB, 3)
    for role, worker in (("ref", judge.ref.worker), ("cand", started.worker)):
        for cmd, peak in worker.gpu_peaks.items():
            peaks[f"gpu_peak_gib_{role}_{cmd}"] = round(peak / GIB, 3)
        used += max(worker.gpu_peaks.values(), default=0) / GIB
        if os.environ.get("KZ_GPU_TRACE"):
            steps = " ".join(f"{c}:{a / GIB:.2f}/{r / GIB:.2f}/{e / GIB:.2f}" for c, a, r, e in worker.gpu_trace)
            notes.append(f"GPU memory trace of the {role} (allocated/reserved/export GiB): {steps}"[:4000])
    leased = judge.stage_s.get("gpu_mem_gib")
    if leased is not None and used > leased:  # the lease's estimate (memory.verification_need) fell short
        notes.insert(
            0,
            f"GPU memory: the verification's processes peaked at {used:.1f} GiB (PyTorch's reserved memory and "
            f"export copies; the judge's lent arenas come on top) over its lease of {leased:.1f} GiB",
        )
    return peaks, notes


def cpu_seconds_of(judge, started) -> dict[str, float]:
    """CPU seconds of this verification's processes: the judge's own since its request came (since its start for a
    judge's first request: imports, warm-up and the waiting of a standby included), and each worker's by command as
    its replies said, summed (`cpu_s_ref`, `cpu_s_cand`; a kept reference's count from this request)."""
    zygote = sys.modules.get("kernelzero.verify.sandbox.zygote")  # imported where this judge was forked
    judge_s = cpu_seconds() - BASE["cpu_s"]
    own = {"cpu_s_judge": round(judge_s, 3), "forked_judge": float(getattr(zygote, "FORKED_JUDGE", False))}
    workers = (("ref", judge.ref.worker), ("cand", started.worker))
    forked = {f"forked_{role}": float(w.forked) for role, w in workers}  # 1.0: started by the fork server
    by_command = {f"cpu_s_{role}_{cmd}": round(s, 3) for role, w in workers for cmd, s in w.cpu_by_cmd.items()}
    ipc = {f"ipc_judge_{k}": round(s, 4) for k, s in cuda_ipc.SECONDS.items()}  # wall seconds in IPC work
    ipc |= {f"ipc_{role}_{k}": round(s, 4) for role, w in workers for k, s in w.ipc_s.items()}
    totals = {f"cpu_s_{role}": round(sum(w.cpu_by_cmd.values()), 3) for role, w in workers}
    return own | forked | ipc | totals | by_command
