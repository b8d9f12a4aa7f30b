"""How fast a completion that never reaches a judge is answered (issue 26 item 3: a sample that fails to parse or
extract answered in under 50 ms without a judge): the pool's pre-checks (`service.contract.rejected`: extraction,
parsing, the static rules) on four kinds of answer to a small task, each timed `--repeats` times after one warm-up.

    PYTHONPATH=src python3 bench/prejudge_latency.py --repeats 50      # any machine; no GPU, no judge process
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kernelzero.service.contract import VerifyRequest, rejected
from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for

GOOD = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "correct" / "triton_gelu.py").read_text()


def answers() -> dict[str, str]:
    """Answers the pre-checks refuse: no code, a syntax error, no ModelNew, a static violation."""
    fenced = "```python\n{}\n```"
    return {
        "no code": "I could not write a kernel for this module.",
        "syntax error": fenced.format(GOOD.replace("def forward", "def forward(:", 1)),
        "no ModelNew": fenced.format("import torch\n\nclass Model(torch.nn.Module):\n    pass\n"),
        "static violation": fenced.format(GOOD + "\nimport subprocess\n"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    task, opts = resize(task, preset="smoke"), options_for(compile_check=False)
    print("| answer | status | median ms | longest ms |\n|---|---|---|---|")
    for name, text in answers().items():
        rejected(VerifyRequest(task, text, "triton", opts))  # imports and caches: not the answer's cost
        took, status = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            verdict = rejected(VerifyRequest(task, text, "triton", opts))
            took.append((time.perf_counter() - start) * 1e3)
            status = verdict.status if verdict is not None else "reaches a judge"
        print(f"| {name} | {status} | {statistics.median(took):.2f} | {max(took):.2f} |")


if __name__ == "__main__":
    main()
