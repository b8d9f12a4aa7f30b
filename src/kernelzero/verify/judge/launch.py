"""Entry point of the judge process: `python -m kernelzero.verify.judge.launch REQUEST.json RESULT.json`.

It starts the candidate's sandboxed worker first, before importing torch, so the worker's
start-up (a fresh interpreter importing torch and Triton) overlaps the judge's own; then it hands
the running worker to the judge (`judge.py`). If the cheap guess of whether a GPU is visible turns
out wrong once torch is loaded, the judge starts a new worker.

Standby: `python -m kernelzero.verify.judge.launch --standby SPEC_JSON` does all of that before any request
exists (verify/judge/standby.py keeps a few ready): it starts its worker and a reference process with the sandbox
of SPEC (user, network, host memory), imports torch, and on a GPU warms both at once (verify/worker/warm.py; the
reference CUDA alone) and runs the worker's CUDA IPC check. Then it reads two lines on stdin, REQUEST.json and
RESULT.json, writes the candidate into the worker's folder and the task's sized source into the reference's (the file the cold path writes), and judges
exactly as above. It serves one request and exits; a request whose sandbox differs from SPEC gets a fresh worker
and reference; end of input without a request ends it. (Measured on the H200, 2026-12-03: a standby without its
reference took 8.3 s for a miniature sample, 1.5 s of it in stages, most of the rest the reference's start-up, a
fresh interpreter importing torch; with it, 1.9 s.)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from kernelzero.types import Task, from_dict
from kernelzero.verify.judge.task_source import TaskBroken, sized_source, start_reference
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import box, safe_fs
from kernelzero.verify.sandbox.process import (
    die_with_parent,
    gpu_visible,
    make_non_dumpable,
    outlive_parent,
    plan_for,
    plan_sandbox,
    scratch_folder,
)
from kernelzero.verify.sandbox.worker_process import (
    StartedWorker,
    WorkerDied,
    kill_all,
    rewrite_candidate,
    start_worker,
)


def sandbox_spec(opts: VerifyOptions, on_gpu: bool) -> dict:
    """What a started worker's sandbox depends on (a standby's SPEC)."""
    return {
        "uids": opts.sandbox_uids,
        "isolate_network": opts.isolate_network,
        "unsafe": opts.unsafe_no_sandbox,
        "host_mem_gb": opts.host_mem_gb,
        "on_gpu": on_gpu,
    }


def on_gpu(opts: VerifyOptions) -> bool:
    """Whether a judge for these options runs on a GPU (a guess before torch is imported)."""
    return opts.device == "cuda" or (opts.device == "auto" and gpu_visible())


def _answer(path: str, payload: dict) -> None:
    """Write the result (atomically), then let go of the output the caller reads to its end: it takes the
    result now, without waiting for this process's teardown.

    The result's folder is the caller's own (judge/run.py: a temporary folder only its user can open), never one
    a sandbox user can write; the file is still made fresh (O_EXCL, no link followed) and renamed into place."""
    folder = safe_fs.open_folder(Path(path).parent)
    try:
        safe_fs.replace_file(folder, Path(path).name, json.dumps(payload).encode(), 0o600)
    finally:
        os.close(folder)
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    outlive_parent()


def _start_reference(request: dict, opts: VerifyOptions, folder: Path) -> StartedWorker | None:
    """The task's reference process, started now (None when the task's source is broken: the judge says how)."""
    try:
        return start_reference(from_dict(Task, request["task"]), opts, folder)
    except TaskBroken:
        return None


def main(argv: list[str]) -> int:
    make_non_dumpable()
    if argv[:1] != ["--parent"]:
        raise SystemExit("usage: launch --parent PID (REQUEST RESULT | --standby SPEC)")
    die_with_parent(int(argv[1]), on_death=kill_all)  # every worker and its folders go before anything unwinds
    argv = argv[2:]
    if argv[0] == "--standby":
        return standby(json.loads(argv[1]))
    request = json.loads(Path(argv[0]).read_text())
    opts = from_dict(VerifyOptions, request["options"])
    box.assume_checked(opts.sandbox_uids, opts.isolate_network)  # verify() checked it before starting this judge
    gpu = on_gpu(opts)
    with scratch_folder("kz-cand-") as shared, scratch_folder("kz-ref-") as ref_folder:
        try:
            started = start_worker(
                request["source"],
                shared,
                interpret=not gpu and request["backend"]["without_gpu"] == "interpret",
                sandbox=plan_for(opts),
                host_mem_gb=opts.host_mem_gb,
            )
            deferred: list = [started.worker]  # closed after the answer (the caller does not wait for that)
            reference = _start_reference(request, opts, ref_folder)
            if reference is not None:
                deferred.append(reference.worker)
            from kernelzero.verify.judge.judge import judge_request  # torch loads here, while the workers start

            _answer(argv[1], judge_request(request, started, deferred, reference))
            for worker in deferred:
                worker.close()
        finally:  # an error: whatever still runs is killed before its folder goes
            kill_all()
    return 0


def standby(spec: dict) -> int:
    box.assume_checked(spec["uids"], spec["isolate_network"])  # the pool checked it before starting standbys
    with scratch_folder("kz-cand-") as shared, scratch_folder("kz-ref-") as ref_folder:
        try:
            workers = [
                start_worker(
                    "",
                    folder,
                    interpret=not spec["on_gpu"] and role == "candidate",
                    sandbox=plan_sandbox(spec["uids"], spec["isolate_network"], spec["unsafe"]),
                    host_mem_gb=spec["host_mem_gb"],
                    role=role,
                )
                for folder, role in ((shared, "candidate"), (ref_folder, "reference"))
            ]
            served = _serve_standby(spec, *workers)
            for started in workers:
                started.worker.close()
            return served
        finally:  # an error: whatever still runs is killed before its folder goes
            kill_all()


def _wait_for_request(gpu: bool) -> list[str]:
    """The request's two paths from stdin (empty at its end); on a GPU the judge's and its two workers' CUDA contexts
    stand in the memory ledger meanwhile (judge/memory.py), so that every lease taken while this judge waits counts
    them. The judge's own lease enters them again once the request is here."""
    if not gpu:
        return [sys.stdin.readline().strip(), sys.stdin.readline().strip()]
    from kernelzero.verify.judge.lease import device_uuid
    from kernelzero.verify.judge.memory import BASE_BYTES, standing_base

    with standing_base(BASE_BYTES, device_uuid()):  # the judge's, its worker's and its reference's contexts, holds
        return [sys.stdin.readline().strip(), sys.stdin.readline().strip()]


def _serve_standby(spec: dict, started: StartedWorker, reference: StartedWorker) -> int:
    """A standby judge: warm up, wait for one request, judge it (see the module docstring)."""
    import torch

    from kernelzero.verify.judge.judge import judge_request  # torch loads here, while the workers start

    gpu = spec["on_gpu"] and torch.cuda.is_available()
    if gpu:
        torch.zeros(1, device="cuda")  # the judge's CUDA context
    _warm((started, reference) if gpu else (started,), gpu)  # a CPU reference has nothing worth warming
    if gpu and started.worker.proc.poll() is None:
        with contextlib.suppress(WorkerDied):  # seen below: the request gets a fresh worker
            started.ipc_why = started.worker.check_ipc()
    paths = _wait_for_request(gpu)
    if not all(paths):
        return 0
    request = json.loads(Path(paths[0]).read_text())
    opts = from_dict(VerifyOptions, request["options"])
    interpret = not on_gpu(opts) and request["backend"]["without_gpu"] == "interpret"
    same_box = sandbox_spec(opts, on_gpu(opts)) == spec
    if not same_box or interpret != started.interpret or started.worker.proc.poll() is not None:
        started.worker.close()
        started = None  # the judge starts a worker with this request's sandbox
    else:
        rewrite_candidate(started, request["source"])  # nothing the sandbox planted in its folder is followed
        if not opts.cuda_ipc and started.ipc_why == "":  # checked, but this request asks for host memory
            started.worker.ipc_off()
            started.ipc_why = None
    if same_box:
        reference = _task_into(reference, request)
    else:  # closed now: its CUDA context would otherwise stand beside the judge's own reference
        reference.worker.close()
        reference = None
    deferred: list = []
    try:
        _answer(paths[1], judge_request(request, started, deferred, reference))
    finally:  # after the answer (the caller does not wait for the worker's exit), or on the death signal
        for worker in deferred:
            worker.close()
    return 0


def _warm(workers: tuple[StartedWorker, ...], gpu: bool) -> None:
    """The standby workers' warm-ups (worker/warm.py), all asked before any is awaited, so they overlap: imports, the
    CUDA context, and the candidate's Triton's first launch; a worker that dies here is replaced when the request
    comes. Each worker's note says what its warm-up took."""
    asked = []
    for started in workers:
        with contextlib.suppress(WorkerDied):
            started.worker.send({"cmd": "warm", "gpu": gpu})
            asked.append(started)
    for started in asked:
        try:
            reply, _ = started.worker.receive(300.0, "the standby worker's warm-up")
        except WorkerDied:
            continue
        started.plan = replace(
            started.plan, notes=[*started.plan.notes, f"standby worker: {reply.get('note', '')[:120]}"]
        )


def _task_into(reference: StartedWorker, request: dict) -> StartedWorker | None:
    """The standby's reference process, given the request's task: its sized source written as the file the cold
    path writes (root's, read-only to the reference), through the folder's descriptor. None (the process closed)
    when it died waiting or the task's source cannot be written: the judge then starts one, or says why not."""
    if reference.worker.proc.poll() is None:
        try:
            source = sized_source(from_dict(Task, request["task"]))
            safe_fs.replace_file(reference.worker.folder_fd, reference.cand_path.name, source.encode(), 0o444)
            return reference
        except TaskBroken:
            pass
    reference.worker.close()
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
