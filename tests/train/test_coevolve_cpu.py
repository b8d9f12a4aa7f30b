"""`kernelzero train --config configs/tiny-cpu.yaml`: one full co-evolution round on CPU, killed and resumed.

The run builds two tiny local models (the Proposer fitted on one template proposal, the Coder warm-started on
that template module with a known-good kernel), runs the Proposer phase (2 GRPO steps: its proposals go through
the real admission, admitted modules are solved N = 8 times by the real tiny Coder and verified by the real
verifier), writes the band pool, runs the Coder phase (`train coder` on that pool, 2 steps, held-out eval) and
the report. The test kills the whole process group once the Proposer phase has written its first checkpoint,
reruns the same command, and checks that the run completes with every artefact, each phase finished once, and
no step recorded twice; and that it exercises the middle of the method: an admitted module's p strictly between
0 and 1 (a Frontier Reward other than 0 and -1), Coder groups with non-zero advantages, and the Coder's weights
changed by its phase. One test function on purpose: the run is the expensive part.
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

from kernelzero.rewards import frontier_reward

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "tiny-cpu.yaml"
INDEX = ROOT / "tests" / "proposer" / "bench_fixture.jsonl"  # the benchmark index (a clean clone has no ../shared)
RHO = -1.0
N = 8  # proposer.solve.samples in tiny-cpu.yaml
PER_STEP = 4  # proposer.grpo.prompts_per_step x group_size


def command(run: Path) -> list[str]:
    index = INDEX
    return [
        *(sys.executable, "-m", "kernelzero", "train", "--config", str(CONFIG), "--set", f"run_dir={run}"),
        *("--set", f"proposer.admission.benchmark_index={index}"),
        *("--set", "grpo.anchor_tasks=2"),  # the Coder phase's round folder has the generated held-out split
    ]


def env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_one_round_end_to_end_killed_mid_phase_then_resumed(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen(
        command(run), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(), start_new_session=True
    )
    marker = run / "round-1" / "proposer" / "checkpoints" / "checkpoint-1" / "trainer_state.json"
    deadline = time.monotonic() + 600
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the Proposer phase wrote no checkpoint before the deadline"
    os.killpg(proc.pid, signal.SIGKILL)  # the loop and its phase process
    proc.wait(timeout=60)
    state = json.loads((run / "state.json").read_text())
    assert [p["phase"] for p in state["finished"]] == ["prepare"], "the kill came after the Proposer phase"
    done = subprocess.run(command(run), capture_output=True, text=True, timeout=900, env=env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming" in done.stdout, "the Proposer phase started over instead of resuming its checkpoint"
    check_every_artefact(run)
    check_each_phase_once_and_no_step_twice(run)
    check_rewards_follow_admission_and_the_coders_verdicts(run)
    check_band_pool_feeds_the_coder_phase(run)
    check_the_middle_of_the_method(run)


def check_every_artefact(run: Path) -> None:
    for rel in [
        "config.yaml",
        "state.json",
        "summary.json",
        "catalog.json",
        "pool.jsonl",
        "coder-init/policy_init/config.json",
        "coder-init/warm_start/model.safetensors",
        "proposer-init/warm_start/model.safetensors",
        "proposer-init/warm_start.jsonl",
        "proposer/admissions.jsonl",
        "proposer/admitted.jsonl",
        "round-1/inputs.jsonl",
        "round-1/proposer/steps.jsonl",
        "round-1/proposer/proposals.jsonl",
        "round-1/proposer/solutions.jsonl",
        "round-1/proposer/checkpoints/checkpoint-2/trainer_state.json",
        "round-1/proposer/policy/model.safetensors",
        "round-1/coder_tasks.jsonl",
        "round-1/coder.yaml",
        "round-1/coder/steps.jsonl",
        "round-1/coder/policy/model.safetensors",
        "round-1/coder/eval/warm/metrics.json",
        "round-1/coder/eval/step-2/metrics.json",
        "round-1/coder/report.md",
        "report.md",
        "verdicts.sqlite",
    ]:
        assert (run / rel).exists(), rel
    report = (run / "report.md").read_text()
    assert "| 1 | 8 |" in report and "pass@1" in report  # round 1: 8 proposals


def check_each_phase_once_and_no_step_twice(run: Path) -> None:
    state = json.loads((run / "state.json").read_text())
    assert [p["phase"] for p in state["finished"]] == ["prepare", "round-1/proposer", "round-1/coder"]
    steps = rows(run / "round-1" / "proposer" / "steps.jsonl")
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        assert s["proposals"] == PER_STEP and sum(s["reasons"].values()) + s["admitted"] == PER_STEP
        for key in ("admission_rate", "success_hist", "reward_mean", "distinct_api_sets", "near_duplicate_share"):
            assert key in s
        assert s["time_generate_s"] > 0 and s["time_admit_s"] > 0 and s["time_update_s"] > 0
        assert s.get("held", False) == (s["groups_with_signal"] == 0)  # no signal: the update was held
        assert sum(s["try_statuses"].values()) == s["admitted"] * N  # the Coder's tries at the admitted modules
    proposals = rows(run / "round-1" / "proposer" / "proposals.jsonl")
    assert sorted(p["step"] for p in proposals) == [1] * PER_STEP + [2] * PER_STEP
    ids = [p["id"] for p in proposals]
    admissions = [a["id"] for a in rows(run / "proposer" / "admissions.jsonl")]
    assert sorted(admissions) == sorted(ids) and len(set(ids)) == len(ids)
    coder = rows(run / "round-1" / "coder" / "steps.jsonl")
    assert [s["step"] for s in coder] == [1, 2]
    assert all(s.get("held", False) == (s["groups_with_signal"] == 0) for s in coder)


def check_rewards_follow_admission_and_the_coders_verdicts(run: Path) -> None:
    proposals = rows(run / "round-1" / "proposer" / "proposals.jsonl")
    solutions = rows(run / "round-1" / "proposer" / "solutions.jsonl")
    assert any(p["admitted"] for p in proposals), "no proposal was admitted: the Proposer's warm start failed"
    suite = {r["name"] for r in rows(run / "proposer" / "admitted.jsonl")}
    for p in proposals:
        if not p["admitted"]:
            assert p["reason"] and p["p"] is None and p["reward"] == RHO
            continue
        tries = [s for s in solutions if s["task"] == p["task"] and s["step"] == p["step"]]
        assert len(tries) == N and p["task"] in suite
        assert p["p"] == sum(s["correct"] for s in tries) / N
        assert p["reward"] == pytest.approx(frontier_reward(p["p"]))


def check_band_pool_feeds_the_coder_phase(run: Path) -> None:
    pool = rows(run / "round-1" / "coder_tasks.jsonl")
    admitted = {r["name"] for r in rows(run / "proposer" / "admitted.jsonl")}
    assert pool and {r["name"] for r in pool} <= admitted
    coder = json.loads((run / "round-1" / "coder.yaml").read_text())
    assert coder["tasks"]["suite"] == str(run / "round-1" / "coder_tasks.jsonl")
    assert coder["model"]["path"] == str(run / "coder-init" / "warm_start")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["coder"] == str(run / "round-1" / "coder" / "policy")


def check_the_middle_of_the_method(run: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from kernelzero.train.coevolve_report import round_rows

    proposals = rows(run / "round-1" / "proposer" / "proposals.jsonl")
    inside = [p for p in proposals if p["admitted"] and 0 < p["p"] < 1]
    assert inside, f"no admitted module with p strictly inside (0, 1): {[p['p'] for p in proposals]}"
    assert all(0 < p["reward"] <= 1 for p in inside)  # Frontier Rewards other than 0 and -1
    index = str(INDEX)
    assert {p["benchmark_dedup"] for p in proposals} == {index}  # de-duplicated against the given index
    assert {r["provenance"]["benchmark_dedup"] for r in rows(run / "round-1" / "coder_tasks.jsonl")} == {index}
    steps = rows(run / "round-1" / "coder" / "steps.jsonl")
    assert any(s["groups_with_signal"] > 0 for s in steps), "every Coder group had one outcome: zero advantages"
    assert all(s["anchor_nll"] > 0 for s in steps) and steps[0]["anchor_nll_start"] > 0
    before = load_file(run / "coder-init" / "warm_start" / "model.safetensors")
    after = load_file(run / "round-1" / "coder" / "policy" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before), "the Coder phase left its weights unchanged"
    moved = round_rows(run)[0]["coder_moved"]  # the round's report says so too, from round-1/coder.yaml's start
    assert moved["changed"] > 0 and moved["relative_l2"] > 0
