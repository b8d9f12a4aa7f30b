"""The sandbox: the candidate's process and the wire between it and the judge.

- `process.py`: the sandbox's rules for a child process (own session, scrubbed environment, network namespace,
  unprivileged user, no core dumps, death with its parent); `popen_sandboxed` for generated code other than a worker.
- `worker_process.py`: the candidate's worker as the judge sees it (start, commands, replies under deadlines and a
  resident-memory watchdog, `WorkerDied`).
- `channel.py`: the framed JSON + raw-bytes protocol (no unpickling of what the candidate's process wrote).
- `safe_fs.py`: file operations of trusted code in folders the sandbox user can write (no link followed, no FIFO
  read, descriptors of folders opened before they are handed over).
- `cuda_ipc.py`: GPU tensors through CUDA IPC, in allocations of their own with checked ranges.
"""

_PROCESS = (
    "SandboxPlan",
    "StartedWorker",
    "WorkerDied",
    "WorkerProcess",
    "plan_sandbox",
    "popen_sandboxed",
    "prepare_workdir",
    "source_root",
    "start_worker",
)
__all__ = list(_PROCESS)


def __getattr__(name: str):
    # Loaded on first use: the candidate's worker imports `channel` and `cuda_ipc` from here and needs nothing else.
    if name not in _PROCESS:
        raise AttributeError(f"module 'kernelzero.verify.sandbox' has no attribute {name!r}")
    import importlib

    module = "worker_process" if name in ("StartedWorker", "WorkerDied", "WorkerProcess", "start_worker") else "process"
    return getattr(importlib.import_module(f"kernelzero.verify.sandbox.{module}"), name)
