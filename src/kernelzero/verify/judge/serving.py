"""A standby judge: started before any request exists, it serves up to `serves` requests in turn, then exits.

`python -m kernelzero.verify.judge.launch --parent PID --standby SPEC_JSON --serves N` runs `standby(spec, n)`:

- **Before each request** it has a fresh sandboxed candidate worker (a new process, a new folder and a role's uid
  taken anew) and a reference process, started with the sandbox of SPEC (user, network, host memory) and, on a GPU,
  warmed at once (verify/worker/warm.py; the reference CUDA alone), the candidate's CUDA IPC checked. While it
  waits, the contexts of the judge and its two workers stand in the memory ledger (judge/memory.py `standing_base`).
- **A request** arrives as two lines on stdin, REQUEST.json and RESULT.json. The candidate is written into the
  worker's folder (no file the sandbox planted is followed), the task's sized source into the reference's, and the
  judge judges exactly as a one-request judge does (judge/judge.py). A request whose sandbox differs from SPEC gets
  a worker and reference started for it. The answer: judge/judge_io.py `write_answer`.
- **Between requests** the candidate's worker is closed (after the answer: the caller does not wait for it) and the
  judge goes on only when `turns.may_go_on` holds and its GPU still synchronises; then it resets what a verdict
  reads of its own state (`turns.between_requests`). The judge process runs no untrusted code: every candidate
  runs in its own worker, which never outlives its request.
- **A kept reference.** After a request the reference process is asked to rest (its `Model` and cached memory
  dropped, the task's module kept) and kept for the next request with the same task and options
  (`turns.reference_key`): that request skips the reference's start, context and import. A next request for
  another task closes it and starts one for that task. The bytes a resting reference still holds are added to the
  standing base while the judge waits. The verdict of a request served by a kept reference says so (KEPT_NOTE).

End of input without a request ends the judge; so does the death of the process that started it (its workers and
folders go first: sandbox/process.py `die_with_parent`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from kernelzero.types import Task, from_dict
from kernelzero.verify.judge import turns
from kernelzero.verify.judge.judge_io import on_gpu, sandbox_spec, write_answer
from kernelzero.verify.judge.task_source import TaskBroken, sized_source
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import box, safe_fs
from kernelzero.verify.sandbox.process import plan_sandbox, scratch_folder
from kernelzero.verify.sandbox.worker_process import (
    StartedWorker,
    WorkerDied,
    kill_all,
    rewrite_candidate,
    start_worker,
)

KEPT_NOTE = "the task's reference process was kept from this judge's previous request (same task and options)"
REST_LIMIT = 64 << 30  # bytes a resting reference may say it still holds (what it says only sizes a ledger entry)


@dataclass
class Held:
    """A worker the serving judge started, with its folder (removed when it closes)."""

    started: StartedWorker
    folder: contextlib.ExitStack
    key: str | None = None  # a reference's: the request it was built for (None: no task yet)
    extra: int = 0  # a resting reference's GPU bytes beyond its CUDA context (it says so)
    warmed: bool = False

    def close(self) -> None:
        self.started.worker.close()
        self.folder.close()


def _start(spec: dict, role: str) -> Held:
    """A worker of `role` in a fresh scratch folder, with the sandbox of `spec`."""
    folder = contextlib.ExitStack()
    try:
        path = folder.enter_context(scratch_folder("kz-cand-" if role == "candidate" else "kz-ref-"))
        started = start_worker(
            "",
            path,
            interpret=not spec["on_gpu"] and role == "candidate",
            sandbox=plan_sandbox(spec["uids"], spec["isolate_network"], spec["unsafe"]),
            host_mem_gb=spec["host_mem_gb"],
            role=role,
        )
    except BaseException:
        folder.close()
        raise
    return Held(started, folder)


def standby(spec: dict, serves: int = 1) -> int:
    """Serve up to `serves` requests (see the module docstring)."""
    box.assume_checked(spec["uids"], spec["isolate_network"])  # the pool checked it before starting standbys
    held: list[Held] = []
    try:
        held += [_start(spec, "candidate"), _start(spec, "reference")]
        import torch  # while the two workers start

        import kernelzero.verify.judge.judge  # noqa: F401 - the judge's modules too

        gpu = spec["on_gpu"] and torch.cuda.is_available()
        if gpu:
            torch.zeros(1, device="cuda")  # the judge's CUDA context
        for turn in range(serves):
            cand, ref = held[-2], held[-1]
            _ready(cand, ref, gpu)
            paths = _wait_for_request(gpu, ref.extra)
            if not all(paths):
                return 0
            kept = _serve_one(paths, spec, cand, ref, gpu, last=turn == serves - 1)
            if kept is None:
                return 0
            turns.between_requests([kept.started.worker])
            held = [_start(spec, "candidate"), kept]
        return 0
    finally:  # whatever still runs is killed before its folder goes
        kill_all()
        for item in held:
            item.folder.close()


def _ready(cand: Held, ref: Held, gpu: bool) -> None:
    """Warm the workers not yet warmed (both at once) and, on a GPU, check the candidate's CUDA IPC."""
    _warm([h for h in ((cand, ref) if gpu else (cand,)) if not h.warmed], gpu)
    if gpu and cand.started.worker.proc.poll() is None and cand.started.ipc_why is None:
        with contextlib.suppress(WorkerDied):  # seen when the request comes: it gets a fresh worker
            cand.started.ipc_why = cand.started.worker.check_ipc()


def _wait_for_request(gpu: bool, extra: int) -> list[str]:
    """The request's two paths from stdin (empty at its end); on a GPU the judge's and its two workers' CUDA contexts
    (and what a resting reference still holds, `extra`) stand in the memory ledger meanwhile (judge/memory.py), so
    that every lease taken while this judge waits counts them. The judge's own lease enters them again once the
    request is here."""
    if not gpu:
        return [sys.stdin.readline().strip(), sys.stdin.readline().strip()]
    from kernelzero.verify.judge.lease import device_uuid
    from kernelzero.verify.judge.memory import BASE_BYTES, standing_base

    with standing_base(BASE_BYTES + extra, device_uuid()):
        return [sys.stdin.readline().strip(), sys.stdin.readline().strip()]


def _serve_one(paths: list[str], spec: dict, cand: Held, ref: Held, gpu: bool, last: bool) -> Held | None:
    """Judge one request and answer it; the reference to keep for the next request, or None: the judge ends."""
    from kernelzero.verify.judge.judge import judge_request

    request = json.loads(Path(paths[0]).read_text())
    opts = from_dict(VerifyOptions, request["options"])
    interpret = not on_gpu(opts) and request["backend"]["without_gpu"] == "interpret"
    same_box = sandbox_spec(opts, on_gpu(opts)) == spec
    started = _candidate_for(cand, request, opts, same_box, interpret)
    key = turns.reference_key(request)
    reference, imported = _reference_for(ref, request, key, same_box, spec) if same_box else (None, False)
    deferred: list = []
    keep = not last and reference is not None
    try:
        payload = judge_request(request, started, deferred, reference.started if reference else None, imported, keep)
        if imported and "verdict" in payload:
            payload["verdict"]["notes"] = [*payload["verdict"].get("notes", []), KEPT_NOTE]
        go_on = not last and reference is not None and turns.may_go_on(payload) and _gpu_fine(gpu)
        go_on = go_on and _rest(reference)  # before the answer: a judge that says `again` must be able to
        write_answer(paths[1], payload, again=go_on)
    finally:  # after the answer (the caller does not wait for the workers' exit), or on an error
        for worker in deferred:
            worker.close()
    cand.close()
    if not go_on:
        if reference is not None:  # its process and its folder (one started for this request is not the caller's)
            reference.close()
        return None
    reference.key = key
    return reference


def _candidate_for(cand: Held, request: dict, opts: VerifyOptions, same_box: bool, interpret: bool):
    """The started candidate worker with this request's candidate written in; None: the judge starts one (a
    request with another sandbox, a worker started for the other device, or one that died waiting)."""
    started = cand.started
    if not same_box or interpret != started.interpret or started.worker.proc.poll() is not None:
        started.worker.close()
        return None
    rewrite_candidate(started, request["source"])  # nothing the sandbox planted in its folder is followed
    if not opts.cuda_ipc and started.ipc_why == "":  # checked, but this request asks for host memory
        started.worker.ipc_off()
        started.ipc_why = None
    return started


def _reference_for(ref: Held, request: dict, key: str, same_box: bool, spec: dict) -> tuple[Held | None, bool]:
    """The reference process for this request and whether it has the task imported already (a kept one of the same
    key). A kept one of another task is closed and a fresh one started; None when it died or the task's source
    cannot be written (the judge then starts one, or says why not)."""
    if ref.key is not None and ref.key == key and ref.started.worker.proc.poll() is None:
        return ref, True
    if ref.key is not None:  # resting with another task's module
        ref.close()
        ref = _start(spec, "reference")
    ref.warmed = True  # from here on it holds a task: no warm-up (worker/warm.py) is sent to it again
    if ref.started.worker.proc.poll() is None:
        try:
            source = sized_source(from_dict(Task, request["task"]))
            safe_fs.replace_file(ref.started.worker.folder_fd, ref.started.cand_path.name, source.encode(), 0o444)
            return ref, False
        except TaskBroken:
            pass
    ref.close()
    return None, False


def _rest(ref: Held) -> bool:
    """Ask the kept reference to rest (worker/reference_role.py `rest`); False when it failed or died."""
    try:
        ref.started.worker.send({"cmd": "rest"})
        reply, _ = ref.started.worker.receive(60.0, "resting the kept reference")
    except WorkerDied:
        ref.close()
        return False
    if not reply.get("ok"):
        ref.close()
        return False
    held = reply.get("reserved")
    ref.extra = min(max(0, held), REST_LIMIT) if type(held) is int else REST_LIMIT
    return True


def _gpu_fine(gpu: bool) -> bool:
    """The judge's own GPU still synchronises (a judge whose context broke must not serve again)."""
    if not gpu:
        return True
    import torch

    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 - any error: the judge ends
        return False


def _warm(workers: list[Held], gpu: bool) -> None:
    """The workers' warm-ups (worker/warm.py), all asked before any is awaited, so they overlap: imports, the CUDA
    context, and the candidate's Triton's first launch; a worker that dies here is replaced when the request comes.
    Each worker's note says what its warm-up took."""
    asked = []
    for held in workers:
        held.warmed = True
        with contextlib.suppress(WorkerDied):
            held.started.worker.send({"cmd": "warm", "gpu": gpu})
            asked.append(held)
    for held in asked:
        started = held.started
        try:
            reply, _ = started.worker.receive(300.0, "the standby worker's warm-up")
        except WorkerDied:
            continue
        started.plan = replace(
            started.plan, notes=[*started.plan.notes, f"standby worker: {reply.get('note', '')[:120]}"]
        )
