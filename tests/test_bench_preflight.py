"""GPU benchmarks stop at once, saying what is missing, when a call lacks its state (bench/preflight.py).

On a machine without a GPU every GPU benchmark must stop in its first seconds with exit 2 and name each missing
need (the GPU, an earlier call's run folder, the KernelBench dataset), never start work it cannot finish.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHONPATH": str(ROOT / "src")}
    start = time.monotonic()
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return run, time.monotonic() - start


def test_preflight_names_each_missing_need_and_exits_2(tmp_path: Path):
    present = tmp_path / "present.jsonl"
    present.write_text("{}\n")
    args = [sys.executable, "bench/preflight.py", "--name", "b", "--file", str(present), "a dataset"]
    run, _ = _run([*args, "--file", str(tmp_path / "absent.jsonl"), "the other dataset"], tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"found   {present}: a dataset" in run.stdout
    assert f"MISSING {tmp_path / 'absent.jsonl'}: the other dataset" in run.stdout
    assert "stopping now, before any work" in run.stdout
    run, _ = _run(args, tmp_path)
    assert run.returncode == 0 and "MISSING" not in run.stdout


def test_resume_without_an_earlier_optimize_run_stops_at_once(tmp_path: Path):
    run, seconds = _run(["bash", "bench/optimize_gpu.sh", "resume"], tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "MISSING" in run.stdout and "optimize_gelu/: the run of an earlier 'optimize' step" in run.stdout
    assert not (tmp_path / "out" / "resume.log").exists()  # nothing ran
    assert seconds < 60


@pytest.mark.parametrize("script", ["bench/gpu_session.sh", "bench/service_session.sh", "bench/optimize_gpu.sh"])
def test_an_unknown_step_stops_before_any_work(script: str, tmp_path: Path):
    run, seconds = _run(["bash", script, "no_such_step"], tmp_path)
    assert run.returncode == 2 and "unknown step 'no_such_step'" in run.stdout, run.stdout + run.stderr
    assert seconds < 10


def test_kernelbench_steps_need_the_dataset(tmp_path: Path):
    if (ROOT / ".gpu" / "kernelbench.jsonl").exists():
        pytest.skip(".gpu/kernelbench.jsonl is present here")
    run, _ = _run(["bash", "bench/gpu_session.sh", "kb"], tmp_path)
    assert run.returncode == 2
    assert "MISSING .gpu/kernelbench.jsonl: KernelBench's dataset for 'kb'" in run.stdout
