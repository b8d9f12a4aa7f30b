"""Entry point of the judge process: `python -m kernelzero.verify.judge.launch REQUEST.json RESULT.json`.

It starts the candidate's sandboxed worker first, before importing torch, so the worker's
start-up (a fresh interpreter importing torch and Triton) overlaps the judge's own; then it hands
the running worker to the judge (`judge.py`). If the cheap guess of whether a GPU is visible turns
out wrong once torch is loaded, the judge starts a new worker.

Standby: `python -m kernelzero.verify.judge.launch --parent PID --standby SPEC_JSON [--serves N]` starts its workers
before any request exists and serves up to N requests in turn (verify/judge/serving.py; verify/judge/standby.py keeps
a few ready). (Measured on the H200, 2026-12-03: a standby without its reference took 8.3 s for a miniature sample,
1.5 s of it in stages, most of the rest the reference's start-up, a fresh interpreter importing torch; with it, 1.9 s.)

Both paths answer through judge/judge_io.py `write_answer`: the result file, then a line saying so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelzero.types import Task, from_dict
from kernelzero.verify.judge.judge_io import on_gpu, write_answer
from kernelzero.verify.judge.serving import standby
from kernelzero.verify.judge.task_source import TaskBroken, start_reference
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import box
from kernelzero.verify.sandbox.process import die_with_parent, make_non_dumpable, plan_for, scratch_folder
from kernelzero.verify.sandbox.worker_process import StartedWorker, kill_all, start_worker


def _start_reference(request: dict, opts: VerifyOptions, folder: Path) -> StartedWorker | None:
    """The task's reference process, started now (None when the task's source is broken: the judge says how)."""
    try:
        return start_reference(from_dict(Task, request["task"]), opts, folder)
    except TaskBroken:
        return None


def main(argv: list[str]) -> int:
    make_non_dumpable()
    if argv[:1] != ["--parent"]:
        raise SystemExit("usage: launch --parent PID (REQUEST RESULT | --standby SPEC [--serves N])")
    die_with_parent(int(argv[1]), on_death=kill_all)  # every worker and its folders go before anything unwinds
    argv = argv[2:]
    if argv[0] == "--standby":
        serves = int(argv[3]) if argv[2:3] == ["--serves"] else 1
        return standby(json.loads(argv[1]), serves)
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

            write_answer(argv[1], judge_request(request, started, deferred, reference))
            for worker in deferred:
                worker.close()
        finally:  # an error: whatever still runs is killed before its folder goes
            kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
