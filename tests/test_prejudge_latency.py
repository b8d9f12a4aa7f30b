"""The pre-judge latency bench's answers (bench/prejudge_latency.py) are all refused before any judge, each with the
status it is meant to show (the bench times them; nothing here is timed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import prejudge_latency as pj  # noqa: E402

from kernelzero.service.contract import VerifyRequest, rejected  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402
from kernelzero.verify import options_for  # noqa: E402


def test_every_answer_is_refused_before_a_judge():
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    task, opts = resize(task, preset="smoke"), options_for(compile_check=False)
    want = {"no code": "format_error", "syntax error": "format_error", "no ModelNew": "format_error"}
    want["static violation"] = "static_violation"
    got = {name: rejected(VerifyRequest(task, text, "triton", opts)) for name, text in pj.answers().items()}
    assert {name: v.status if v else None for name, v in got.items()} == want
    assert rejected(VerifyRequest(task, f"```python\n{pj.GOOD}\n```", "triton", opts)) is None  # the right one runs
