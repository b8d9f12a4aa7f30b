"""`kernelzero train coder --config configs/tiny-cpu.yaml` end to end on CPU, then a resume after a kill.

The run builds a ~140k-parameter Qwen2 model and a local tokenizer, fits it on two miniature tasks until its
training loss is below 0.01 (so that sampling at temperature 1 gives correct and broken kernels), runs two
CA-GRPO steps with Triton through the interpreter, evaluates through `kernelzero eval`, and writes a report.
About two minutes on 2 cores, then the resume (which reuses the first run's warm start) about one more, and a run
whose second step reuses the first step's batch (`grpo.num_iterations: 2`) about half a minute. It is one
test function on purpose: under pytest-xdist a module fixture would be built once per worker, doubling the cost;
each part is a helper named for what it checks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "tiny-cpu.yaml"


def train(run_dir: Path, *sets: str) -> list[str]:
    args = [
        sys.executable,
        "-m",
        "kernelzero",
        "train",
        "coder",
        "--config",
        str(CONFIG),
        "--set",
        f"run_dir={run_dir}",
    ]
    for item in sets:
        args += ["--set", item]
    return args


def env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def run_tiny(run: Path) -> None:
    proc = subprocess.run(train(run), capture_output=True, text=True, timeout=900, env=env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_tiny_cpu_run_end_to_end_then_resume_after_kill(tmp_path):
    tiny_run = tmp_path / "tiny"
    run_tiny(tiny_run)
    check_run_folder_holds_every_artefact(tiny_run)
    check_step_logs_hold_the_issue_fields(tiny_run)
    check_rewards_are_not_all_zero_and_a_step_with_signal_changed_the_weights(tiny_run)
    check_eval_ran_through_kernelzero_eval(tiny_run)
    check_other_settings_in_the_same_run_folder_are_refused(tiny_run)
    check_resume_after_kill_duplicates_no_step(tiny_run, tmp_path / "resumed")
    check_a_reused_batch_updates_without_verifying_again(tiny_run, tmp_path / "reused")


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def steps_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line.strip()]


def check_run_folder_holds_every_artefact(tiny_run):
    for rel in [
        "run.json",
        "summary.json",
        "tasks/sft.jsonl",
        "tasks/test.jsonl",
        "policy_init/tokenizer.json",
        "warm_start/model.safetensors",
        "warm_start.jsonl",
        "checkpoints/checkpoint-1/model.safetensors",
        "checkpoints/checkpoint-2/trainer_state.json",
        "policy/model.safetensors",
        "policy/tokenizer.json",
        "eval/warm/metrics.json",
        "eval/step-2/metrics.json",
        "eval/step-2/verdicts.jsonl",
        "report.md",
        "train_rewards.png",
        "train_time.png",
        "verdicts.sqlite",
    ]:
        assert (tiny_run / rel).exists(), rel
    assert list((tiny_run / "tb").glob("events.out.tfevents.*")), "no TensorBoard events"
    report = (tiny_run / "report.md").read_text()
    assert "| 2 |" in report and "pass@1" in report


def check_step_logs_hold_the_issue_fields(tiny_run):
    steps = steps_of(tiny_run)
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        assert s["samples"] == 8 and sum(s["statuses"].values()) == 8
        for key in ("correct_rate", "gate_open_share", "mean_speedup", "geomean_speedup", "completion_tokens"):
            assert key in s
        assert s["time_generate_s"] > 0 and s["time_verify_s"] > 0 and s["time_update_s"] > 0
    warm = [json.loads(line) for line in (tiny_run / "warm_start.jsonl").read_text().splitlines()]
    assert warm[-1]["loss"] < 0.01  # the warm start stopped on its loss threshold


def check_rewards_are_not_all_zero_and_a_step_with_signal_changed_the_weights(tiny_run):
    steps = steps_of(tiny_run)
    assert any(s["correct_rate"] > 0 for s in steps), "every reward was zero: the run learned nothing"
    with_signal = [s["step"] for s in steps if s["groups_with_signal"] > 0]
    assert with_signal, f"no step had a group with nonzero advantages: {steps}"
    step = with_signal[0]
    before = weights(tiny_run / ("warm_start" if step == 1 else f"checkpoints/checkpoint-{step - 1}"))
    after = weights(tiny_run / f"checkpoints/checkpoint-{step}")
    changed = [name for name in before if not (before[name] == after[name]).all()]
    assert changed, f"step {step} had nonzero advantages but no weight changed"
    assert next(s for s in steps if s["step"] == step)["grad_norm"] > 0


def check_eval_ran_through_kernelzero_eval(tiny_run):
    metrics = json.loads((tiny_run / "eval" / "step-2" / "metrics.json").read_text())
    assert metrics["overall"]["tasks"] == 2 and metrics["overall"]["samples"] == 4
    assert "1" in metrics["overall"]["pass@k"]
    run_json = json.loads((tiny_run / "eval" / "step-2" / "run.json").read_text())
    assert run_json["config"]["per_gpu"] == 4  # the reward's verifier.per_gpu (default 4), not eval's own 2


def check_resume_after_kill_duplicates_no_step(tiny_run, run):
    sets = [f"model.path={tiny_run / 'warm_start'}", "warm_start.steps=0", "eval.enabled=false", "grpo.steps=2"]
    sets.append(f"verifier.store={tiny_run / 'verdicts.sqlite'}")  # the same samples were verified by the first run
    proc = subprocess.Popen(train(run, *sets), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    marker = run / "checkpoints" / "checkpoint-1" / "trainer_state.json"
    deadline = time.monotonic() + 600
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "no checkpoint before the deadline"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (run / "policy").exists(), "the run finished before it was killed"
    done = subprocess.run(train(run, *sets), capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming" in done.stdout
    assert [s["step"] for s in steps_of(run)] == [1, 2]
    state = json.loads((run / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert (run / "policy" / "step.txt").read_text() == "2"


def check_other_settings_in_the_same_run_folder_are_refused(tiny_run):
    from kernelzero.train.coder import _check_run_json
    from kernelzero.train.config import load_config

    same = load_config(CONFIG, {"run_dir": str(tiny_run)})
    _check_run_json(same, tiny_run)  # the run's own settings pass (run.json holds lists where the config has tuples)
    _check_run_json(load_config(CONFIG, {"run_dir": str(tiny_run), "grpo": {"steps": 3}}), tiny_run)  # extend
    with pytest.raises(ValueError, match="reward.alpha"):
        _check_run_json(load_config(CONFIG, {"run_dir": str(tiny_run), "reward": {"alpha": 0.75}}), tiny_run)


def check_a_reused_batch_updates_without_verifying_again(tiny_run, run):
    """`grpo.num_iterations: 2`: step 2 trains on step 1's batch, its line says so and carries no verification.
    With the KL anchor, truncated completions masked, and the anchor NLL of the two held-out tasks on each line."""
    sets = [f"model.path={tiny_run / 'warm_start'}", "warm_start.steps=0", "eval.enabled=false", "grpo.steps=2"]
    sets += ["grpo.num_iterations=2", "grpo.save_steps=2", f"verifier.store={tiny_run / 'verdicts.sqlite'}"]
    sets += ["grpo.kl_beta=0.04", "grpo.mask_truncated=true", "grpo.anchor_tasks=2"]
    done = subprocess.run(train(run, *sets), capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first, second = steps_of(run)
    assert (first["step"], first["batch_step"], second["step"], second["batch_step"]) == (1, 1, 2, 1)
    assert first["samples"] == 8 and first["time_verify_s"] > 0
    assert "samples" not in second and second["time_verify_s"] == 0 and second["time_generate_s"] == 0
    assert "clip_ratio/region_mean" in second
    assert first["anchor_nll_start"] > 0 and first["anchor_nll"] > 0 and second["anchor_nll"] > 0
    assert "anchor_nll_start" not in second and "kl" in first and "kl" in second
    state = json.loads((run / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
