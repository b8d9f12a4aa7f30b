"""Entry point of the judge process: `python -m kernelzero.verify.launch REQUEST.json RESULT.json`.

It starts the candidate's sandboxed worker first, before importing torch, so the worker's
start-up (a fresh interpreter importing torch and Triton) overlaps the judge's own; then it hands
the running worker to the judge (`judge.py`). If the cheap guess of whether a GPU is visible turns
out wrong once torch is loaded, the judge starts a new worker.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from kernelzero.types import from_dict
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import die_with_parent, gpu_visible, make_non_dumpable, start_worker


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    make_non_dumpable()
    die_with_parent()
    opts = from_dict(VerifyOptions, request["options"])
    on_gpu = opts.device == "cuda" or (opts.device == "auto" and gpu_visible())
    with tempfile.TemporaryDirectory(prefix="kz-cand-") as shared:
        started = start_worker(request["source"], Path(shared), interpret=not on_gpu and request["backend"] == "triton",
                               user=opts.sandbox_user, isolate_network=opts.isolate_network,
                               host_mem_gb=opts.host_mem_gb)  # fmt: skip
        from kernelzero.verify.judge import judge_request  # torch loads here, while the worker starts

        Path(argv[1]).write_text(json.dumps(judge_request(request, started)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
