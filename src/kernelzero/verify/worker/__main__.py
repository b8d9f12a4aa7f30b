"""`python -m kernelzero.verify.worker OUT_FD [reference]`: the candidate's process (or, with `reference`, the
task's reference process), started by the judge only."""

import os
import sys

from kernelzero.verify.sandbox.channel import recv_obj, use_ipc, use_out_dir
from kernelzero.verify.worker.reference_role import ReferenceWorker
from kernelzero.verify.worker.worker import Worker


def main(argv: list[str]) -> int:
    """`OUT_FD [reference]`: serve the judge's commands until `exit` (the task's reference with `reference`)."""
    use_out_dir(os.environ.get("KZ_XFER_OUT"))
    if argv[1:] == ["reference"]:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: its memory and /proc files stay closed to all
        worker = ReferenceWorker(int(argv[0]))
    else:
        worker = Worker(int(argv[0]))
    handlers = {
        "import": worker.import_candidate,
        "load": worker.load,
        "run": worker.run,
        "time_stage": worker.time_stage,
        "time_run": worker.time_run,
        "time_fetch": worker.time_fetch,
        "gpu_compile": worker.gpu_compile,
        "ipc_check": worker.ipc_check,
        "warm": worker.warm,
        "context": worker.context,
        **worker.extra_commands(),
    }
    while True:
        req = recv_obj(0)
        if req["cmd"] == "exit":
            return 0
        use_ipc(req.get("ipc_out", False))
        handlers[req["cmd"]](req)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
