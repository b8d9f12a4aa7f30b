"""CUDA Coder training on CPU (train/config.py, train/reward.py): `backend: cuda` is accepted with an explicit
CPU reward, the compile check: c_i = 1 for a kernel that passes the static checks and builds for sm_90 with nvcc
(status `compiled`; nothing runs, nothing is timed), 0 for anything else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelzero.coder.prompts import build_messages
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import load_suite
from kernelzero.train.config import RewardConfig, VerifierConfig, load_config
from kernelzero.train.reward import CoderReward, verdict_row

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "tiny-cpu.yaml"
CUDA_CPU = {
    "backend": "cuda",
    "device": "cpu",
    "warm_start": {"steps": 0},
    "reward": {"compiled_counts": True},
    "verifier": {"options": {"compile_check": True}},
}


def test_backend_cuda_on_cpu_needs_the_explicit_compile_check_reward():
    cfg = load_config(CONFIG, CUDA_CPU)
    assert cfg.backend == "cuda" and cfg.reward.compiled_counts
    for change, match in [
        ({"reward": {"compiled_counts": False}}, "compile-checks CUDA"),
        ({"verifier": {"options": {"compile_check": False}}}, "needs the compile check"),
        ({"warm_start": {"steps": 10}}, "Triton kernels"),
        ({"backend": "triton"}, "for backend cuda with device cpu"),
        ({"backend": "helion"}, "must be one of triton, cuda"),
    ]:
        with pytest.raises(ValueError, match=match):
            load_config(CONFIG, {**CUDA_CPU, **change})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc: the CUDA compile check cannot run")
def test_cpu_reward_of_a_cuda_kernel_is_its_compile_check(tmp_path):
    task = {t.name: t for t in load_suite("kz-basic").tasks}["level1/24_LeakyReLU"]
    assert "load_inline" in build_messages(task, "cuda")[1]["content"]  # the Coder is asked for CUDA
    kernel = "```python\n" + (ROOT / "tests" / "kernels" / "correct" / "cuda_relu.py").read_text() + "```"
    store = VerdictStore(tmp_path / "verdicts.sqlite")  # the second call reads the first one's verdicts
    verifier = VerifierConfig(jobs=1, options={"compile_check": False})
    reward = CoderReward({task.name: task}, RewardConfig(compiled_counts=True), verifier, 2, "cuda", store)
    assert reward.timing == "none"  # nothing runs on CPU, so nothing is timed
    verdicts, rows, _ = reward.score([task.name] * 2, [kernel, "no code at all"], [10, 3], lambda r: (r, 0))
    assert [v.status for v in verdicts] == ["compiled", "format_error"]
    assert [r[1] for r in rows] == [1, 0]
    assert reward(prompts=[""] * 2, completions=[kernel, "no code at all"], task=[task.name] * 2) == [1.0, 0.0]
    # the same verdict without the CPU rule: `compiled` is not `correct`
    assert verdict_row(task.name, verdicts[0], 10, "eager")[1] == 0
