"""Without a GPU: compile the candidate's Triton kernels for the target GPU (default sm_90).

Triton's interpreter accepts kernels a GPU compiler rejects (`tl.dot` with K < 16, Python inside a
kernel, shared memory past the limit), so a candidate that passed correctness in the interpreter
is run once more, in a second sandboxed worker without the interpreter, with every kernel launch
turned into a compile for the target (`compile.py`). The first failing compile makes the
verdict `compile_error`. That worker gets a fresh folder with the judge's copy of the source: the first
worker's folder is the candidate's to change (links planted there), so root lays out nothing in it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernelzero.verify.sandbox.process import lay_out_workdir, plan_for, release_role, role_plan, scratch_folder
from kernelzero.verify.sandbox.worker_process import WorkerProcess

if TYPE_CHECKING:
    from kernelzero.types import Verdict
    from kernelzero.verify.judge.judge import Judge


def compile_check(judge: Judge, cand_path: Path) -> Verdict | None:
    """None when every launched kernel compiles for the target; else a compile_error verdict.

    `cand_path` names the first worker's file; the check runs the judge's own copy of the source (`judge.source`)
    in a folder of its own."""
    start = time.perf_counter()
    with scratch_folder("kz-compile-") as folder:
        try:
            return _compile_check(judge, folder)
        finally:
            judge.timed("gpu_compile_check", start)


def _compile_check(judge: Judge, folder: Path) -> Verdict | None:
    plan = role_plan(plan_for(judge.opts))  # a uid of its own, released when the worker closes
    try:
        env, fd = lay_out_workdir(folder, plan, {"candidate.py": judge.source})
    except BaseException:
        release_role(plan)
        raise
    try:
        worker = WorkerProcess(folder, env, plan, int(judge.opts.host_mem_gb * 2**30), folder_fd=fd)
    except BaseException:
        os.close(fd)
        release_role(plan)
        raise
    try:
        worker.send({**judge.load_request(folder / "candidate.py", "cpu", False, 1.0), "hooks": judge.worker_hooks()})
        reply, _ = worker.receive(judge.opts.build_timeout_s, "loading for the GPU compile check")
        if reply["ok"]:
            inputs = judge.ref.input_sets([judge.input_seed + 1], judge.opts.build_timeout_s)[0]
            worker.send(
                {"cmd": "gpu_compile", "inputs": inputs, "arch": judge.opts.target_arch, "hook": f"{__package__}.hook"}
            )
            reply, _ = worker.receive(judge.opts.build_timeout_s, f"compiling for sm_{judge.opts.target_arch}")
    finally:
        worker.close()
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
