"""What the model reads after a turn (env/observe.py), and the verifier and profiler plumbing's failure paths.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/env/test_observe.py`
"""

from __future__ import annotations

import pytest
from env_helpers import ScriptedVerifier, make_verdict

from kernelzero.env import KernelEnv, KernelTime, Verifier
from kernelzero.env.observe import LIMIT, observation, profile_text
from kernelzero.types import Task, Timing

TASK = Task("toy", "import torch\n", suite="s")


def test_timing_against_eager_and_compile_with_the_interval():
    v = make_verdict(
        "correct",
        speedup=1.6,
        ref_compile=Timing(1.0, 1.0, 0.9, 1.1, 30),
        speedup_compile=0.8,
        speedup_ci=(1.5, 1.7),
        own_kernels={"fused": 1, "reduce": 2},
        feedback="Correct; 1.60x the speed of PyTorch eager.",
    )
    text = observation(v)
    assert text.splitlines()[0] == "Correct; 1.60x the speed of PyTorch eager."
    assert "your ModelNew 1.25 ms, PyTorch eager 2 ms (1.60x eager, 95% interval 1.50-1.70)" in text
    assert "torch.compile 1 ms (0.80x compile)" in text
    assert "Your kernels launched per forward call: reduce x2, fused x1." in text
    assert "No profile was taken (no profiler is configured)." in text


def test_failure_feedback_comes_first_and_long_text_is_cut():
    v = make_verdict("compile_error", error_log="\n".join(f"line {i}: error: bad" for i in range(400)))
    text = observation(v)
    assert text.startswith("compile_error: details of the failure") and "line 0: error: bad" in text
    long = make_verdict("runtime_error", feedback="x" * 5000)
    assert len(observation(long)) == LIMIT and observation(long).endswith("...")


def test_profile_lists_the_costliest_kernels_and_lumps_the_rest():
    v = make_verdict("correct", speedup=1.0)
    kernels = [KernelTime(f"k{i}", float(i)) for i in range(1, 9)]
    text = profile_text(v, kernels, have_profiler=True)
    lines = text.splitlines()
    assert lines[1].endswith("k8 (x1)") and len(lines) == 1 + 6 + 1
    assert "2 other kernel(s)" in lines[-1] and "8.3%" in lines[-1]  # k1 + k2 = 3 of 36 ms
    assert profile_text(v, None, have_profiler=True) == "No profile was taken (the profiled run failed)."


def test_a_profiler_returning_the_wrong_count_fails_clearly(scripted: ScriptedVerifier):
    env = KernelEnv(verifier=scripted.verifier(), profiler=lambda items: [])
    ep = env.reset(TASK)
    with pytest.raises(RuntimeError, match="0 profiles for 1 candidates"):
        env.step(ep, "@correct:2.0")
    assert ep.turns == [] and env.samples_used == 0  # nothing recorded, the budget given back


def test_pool_verifier_reports_a_missing_verdict(monkeypatch):
    def half(requests, jobs, store, **kwargs):  # a pool that drops a request
        requests = list(requests)
        return [(requests[0], make_verdict("mismatch"))]

    monkeypatch.setattr("kernelzero.env.verifier.verify_many", half)
    with pytest.raises(RuntimeError, match=r"no verdict for request\(s\) \[1\]"):
        Verifier.pool(jobs=1).verify([(TASK, "a", "triton"), (TASK, "b", "triton")])


def test_pool_verifier_passes_its_options_and_pool_arguments(monkeypatch):
    seen = {}

    def record(requests, jobs, store, **kwargs):
        requests = list(requests)
        seen.update(jobs=jobs, kwargs=kwargs, policies={r.options.policy for r in requests})
        return [(r, make_verdict("correct", task=r.task.name)) for r in requests]

    monkeypatch.setattr("kernelzero.env.verifier.verify_many", record)
    arrived: list[str] = []
    verifier = Verifier.pool(jobs=3, on_verdict=lambda: arrived.append("verdict"), per_gpu=4)
    verdicts = verifier.verify([(TASK, "a", "triton"), (TASK, "b", "triton")])
    assert [v.status for v in verdicts] == ["correct", "correct"] and arrived == ["verdict", "verdict"]
    assert seen == {"jobs": 3, "kwargs": {"per_gpu": 4}, "policies": {"strict"}}  # on_verdict stays here
