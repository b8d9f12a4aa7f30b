"""The one-sample adapters (verl `compute_score`, OpenRLHF `reward_func`) and the verifiers environment: each
called the way its engine calls it, each giving the environment's reward for the same completions.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/env/test_adapters.py`
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from env_helpers import ScriptedVerifier

from kernelzero.env import KernelEnv
from kernelzero.env.adapters.common import resolve_task, task_label
from kernelzero.env.adapters.openrlhf import OpenRLHFReward
from kernelzero.env.adapters.verl import VerlReward, ca_grpo_scores
from kernelzero.types import Task

TASK = Task("toy", "import torch\n", suite="s")


def env_rewards(verifier, task, completions, reward):
    """Each completion as the first turn of its own episode: the environment's step rewards."""
    env = KernelEnv(backend="triton", reward=reward, verifier=verifier)
    return [r.reward for r in env.step_many([env.reset(task) for _ in completions], completions)]


def test_verl_compute_score_equals_the_environment(gelu_task, wrong, good, pool_verifier):
    compute_score = VerlReward(pool_verifier, backend="triton", reward="correctness")
    label = task_label(gelu_task)
    one = compute_score("kernelzero", good, label, {"index": 0})  # the reward-loop managers: one sample a call
    assert one["score"] == 1.0 and one["correct"] == 1.0 and one["status"] == "correct"
    batch = compute_score(
        data_sources=["kz"] * 2, solution_strs=[wrong, good], ground_truths=[label] * 2, extra_infos=[{}, {}]
    )
    assert (
        [b["score"] for b in batch] == env_rewards(pool_verifier, gelu_task, [wrong, good], "correctness") == [0.0, 1.0]
    )
    assert batch[0]["status"] == "mismatch" and batch[0]["speedup_score"] == 0.0
    by_name = VerlReward(pool_verifier, tasks={gelu_task.name: gelu_task})
    assert by_name("kz", good, gelu_task.name)["score"] == 1.0


def test_openrlhf_reward_func_equals_the_environment(gelu_task, wrong, good, pool_verifier):
    import torch

    reward_func = OpenRLHFReward(pool_verifier, backend="triton", reward="speedup")
    prompt = "<|im_start|>user\nWrite ModelNew ...<|im_end|>\n<|im_start|>assistant\n"
    out = reward_func([prompt + wrong, prompt + good], [prompt, prompt], [task_label(gelu_task)] * 2)
    expected = env_rewards(pool_verifier, gelu_task, [wrong, good], "speedup")
    assert out["rewards"].tolist() == expected == [0.0, 1.0]  # CPU: a correct kernel is untimed, speedup reward 1
    assert out["scores"].dtype == torch.float32 and out["scores"].tolist() == [0.0, 1.0]
    assert out["extra_logs"]["kz_correct"].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="does not start with its prompt"):
        reward_func(["something" + good], [prompt], [task_label(gelu_task)])


def test_one_sample_adapters_refuse_unknown_tasks_and_rewards(scripted: ScriptedVerifier):
    with pytest.raises(ValueError, match="cannot find the task for label 'nowhere'.*known: toy"):
        VerlReward(scripted.verifier(), tasks={"toy": TASK})("kz", "@correct", "nowhere")
    with pytest.raises(ValueError, match="unknown reward"):
        OpenRLHFReward(scripted.verifier(), reward="pass@1")
    with pytest.raises(ValueError, match="solution_str"):
        VerlReward(scripted.verifier())()
    assert resolve_task(task_label(TASK), None) == TASK


def test_ca_grpo_scores_gate_each_verl_group():
    # group a: 2 of 4 correct (gate open); group b: 1 of 4 (closed); interleaved as verl may order them
    correct = [1, 1, 0, 0, 1, 0, 0, 0]
    s = [0.5, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    uid = ["a", "b", "a", "b", "a", "b", "a", "b"]
    assert ca_grpo_scores(correct, s, uid) == [1.05, 1.0, 0.0, 0.0, 1.1, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="differ in length"):
        ca_grpo_scores([1], [0.0, 0.0], ["a"])


# -- Prime Intellect verifiers (0.4) ---------------------------------------------------------------------------


class ScriptedInteraction:
    """Stands in for `vf.Interaction`: replies from a script, records what the environment said, owns a real
    `vf.Trace`."""

    def __init__(self, vf, replies: list[str]):
        from verifiers.v1.agent import Segment

        self.segment, self.replies, self.heard = Segment, list(replies), []
        self.trace = vf.Trace(
            task=vf.TraceTask(type="KernelTask", data=vf.TaskData()), agent=vf.AgentInfo(config=vf.AgentConfig())
        )

    async def turn(self, message=None):
        self.heard.append(message)
        if not self.replies:
            return self.segment(messages=[], terminated=True)
        return self.segment(messages=[], root_reply=self.replies.pop(0))


class ScriptedAgents:
    """Stands in for `vf.Agents`: `agents.agent.interaction(task)` hands out the scripted interactions in order."""

    def __init__(self, interactions):
        self.interactions = list(interactions)
        self.agent = self

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        yield self.interactions.pop(0)


@pytest.fixture
def vf_classes(tmp_path, monkeypatch):
    vf = pytest.importorskip("verifiers.v1")
    (tmp_path / "kz_kernels_test.py").write_text(
        "from kernelzero.env.adapters.prime import KernelTaskset\n__all__ = ['KernelTaskset']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from kernelzero.env.adapters.prime import verifiers_classes

    return vf, verifiers_classes()


def test_verifiers_env_plays_a_group_and_gates_it_in_finalize(vf_classes, scripted: ScriptedVerifier):
    vf, kz = vf_classes
    config = kz.EnvConfig(
        taskset={"id": "kz_kernels_test", "suite": "kz-basic", "names": ["level1/21_GELU"], "preset": "smoke"},
        agent=vf.AgentConfig(harness={"id": "null"}),
        group_size=4,
        max_turns=2,
        reward="ca_grpo",
    )
    env = kz.Env(config)  # the real constructor: loads the taskset through verifiers' plugin lookup
    (task,) = list(env.taskset)
    assert task.data.name == "level1/21_GELU" and "ModelNew" in task.data.prompt and task.data.system_prompt
    env.kernel_env = KernelEnv(max_turns=2, reward="ca_grpo", verifier=scripted.verifier())
    scripts = [["@mismatch", "@correct:2.0"], ["@correct"], ["@mismatch", "@timeout"], []]
    chats = [ScriptedInteraction(vf, s) for s in scripts]
    asyncio.run(env.run(task, ScriptedAgents(chats)))
    assert chats[0].heard[0] is None and "mismatch: details" in chats[0].heard[1]  # task first, then the feedback
    assert [c.trace.metrics["kz_correct"] for c in chats] == [1.0, 1.0, 0.0, 0.0]
    assert [c.trace.metrics["kz_turns"] for c in chats] == [2.0, 1.0, 2.0, 0.0]  # the last agent's run ended at once
    episode = vf.Episode(task=vf.TraceTask(type="KernelTask", data=task.data), traces=[c.trace for c in chats])
    asyncio.run(env.finalize(task, episode))
    got = [t.rewards["kernel_reward"].score for t in episode.traces]
    # the same completions through KernelEnv.group_rewards: 2 of 4 correct opens the gate, S = log2(2)/log2(4)
    kenv = KernelEnv(max_turns=2, reward="ca_grpo", verifier=scripted.verifier())
    eps = [kenv.reset(TASK) for _ in scripts]
    for ep, script in zip(eps, scripts):
        for reply in script:
            if not ep.done:
                kenv.step(ep, reply)
    assert got == kenv.group_rewards(eps) == [1.05, 1.0, 0.0, 0.0]
    stray = vf.Trace(
        task=vf.TraceTask(type="KernelTask", data=vf.TaskData()), agent=vf.AgentInfo(config=vf.AgentConfig())
    )
    with pytest.raises(ValueError, match="carry no kernel metrics"):
        asyncio.run(env.finalize(task, vf.Episode(task=episode.task, traces=[stray])))
