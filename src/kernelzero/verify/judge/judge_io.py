"""The judge process's edges, torch-free: what a started worker's sandbox depends on (a standby's SPEC), whether a
judge runs on a GPU, and how a judge hands its answer to its caller.

The answer: the result file is written atomically in the caller's own folder (0700, judge/run.py), then the judge
writes one line on its output, `KZ-ANSWERED <again|last> <result path>`. The caller takes the answer on that line,
and only when its result file exists. A judge's last answer (every one-request judge's) is followed by the end of
its output: it lets go of the pipe at once, so its caller never waits for its teardown. A serving judge
(judge/serving.py) that goes on writes `again` and keeps its output for its next request.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import safe_fs
from kernelzero.verify.sandbox.process import gpu_visible, outlive_parent

ANSWERED = "KZ-ANSWERED"


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


def answered_line(result: str | Path, again: bool) -> bytes:
    """The line a judge writes once the result file at `result` is in place (`again`: it serves another request)."""
    return f"{ANSWERED} {'again' if again else 'last'} {result}\n".encode()


def write_answer(path: str, payload: dict, again: bool = False) -> None:
    """Write the result (atomically), then say so on the output. Unless `again`, let go of the output the caller
    reads to its end: it takes the result now, without waiting for this process's teardown.

    The result's folder is the caller's own (judge/run.py: a temporary folder only its user can open), never one
    a sandbox user can write; the file is still made fresh (O_EXCL, no link followed) and renamed into place."""
    folder = safe_fs.open_folder(Path(path).parent)
    try:
        safe_fs.replace_file(folder, Path(path).name, json.dumps(payload).encode(), 0o600)
    finally:
        os.close(folder)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, answered_line(path, again))
    if again:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    outlive_parent()
