"""Without a GPU: compile the candidate's Triton kernels for the target GPU (default sm_90).

Triton's interpreter accepts kernels a GPU compiler rejects (`tl.dot` with K < 16, Python inside a
kernel, shared memory past the limit), so a candidate that passed correctness in the interpreter
is run once more, in a second sandboxed worker without the interpreter, with every kernel launch
turned into a compile for the target (`compile.py`). The first failing compile makes the
verdict `compile_error`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernelzero.verify.sandbox.process import plan_sandbox, prepare_workdir
from kernelzero.verify.sandbox.worker_process import WorkerProcess

if TYPE_CHECKING:
    from kernelzero.types import Verdict
    from kernelzero.verify.judge.judge import Judge


def compile_check(judge: Judge, cand_path: Path) -> Verdict | None:
    """None when every launched kernel compiles for the target; else a compile_error verdict."""
    start = time.perf_counter()
    plan = plan_sandbox(judge.opts.sandbox_user, judge.opts.isolate_network)
    env = prepare_workdir(cand_path.parent, plan)
    worker = WorkerProcess(cand_path.parent, env, plan, int(judge.opts.host_mem_gb * 2**30))
    try:
        worker.send({**judge.load_request(cand_path, "cpu", False, 1.0), "hooks": judge.worker_hooks()})
        reply, _ = worker.receive(judge.opts.build_timeout_s, "loading for the GPU compile check")
        if reply["ok"]:
            inputs = judge.ref.input_sets([judge.input_seed + 1], judge.opts.build_timeout_s)[0]
            worker.send(
                {"cmd": "gpu_compile", "inputs": inputs, "arch": judge.opts.target_arch, "hook": f"{__package__}.hook"}
            )
            reply, _ = worker.receive(judge.opts.build_timeout_s, f"compiling for sm_{judge.opts.target_arch}")
    finally:
        worker.close()
        judge.timed("gpu_compile_check", start)
    target = f"sm_{judge.opts.target_arch}"
    if not reply["ok"]:
        return judge.verdict(
            reply["status"], "build", f"{target} compile check: {reply['message']}", error_log=reply.get("log", "")
        )
    bad = [r for r in reply["records"] if not r["ok"]]
    if bad:
        first = bad[0]
        return judge.verdict(
            "compile_error",
            "build",
            f"kernel {first['kernel']} does not compile for {target}",
            error_log=first["error"],
        )
    kernels = sorted({r["kernel"] for r in reply["records"]})
    judge.notes.append(f"compiled for {target}: {', '.join(kernels) or 'no kernel launched'}")
    return None
