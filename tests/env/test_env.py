"""KernelEnv: episodes end to end through the real pool, resume, batched stepping, budget, turn limit, rewards.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/env/test_env.py`
"""

from __future__ import annotations

import json

import pytest
from env_helpers import make_verdict

from kernelzero.coder.backends import GenRequest, SamplingParams, load_backend
from kernelzero.env import Episode, KernelEnv, KernelTime, Verifier
from kernelzero.types import Task

TASK = Task("toy", "import torch\n", suite="s")


def replay_file(tmp_path, task_name: str, completions: list[str]) -> str:
    """A replay JSONL whose sample i is the completion of turn i."""
    path = tmp_path / "turns.jsonl"
    rows = [
        {"task": task_name, "completion": c, "sample_idx": i, "output_tokens": 100 + i}
        for i, c in enumerate(completions)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def play(env: KernelEnv, ep: Episode, backend) -> list:
    """Generate with the replay backend (turn t = sample t) and step until the episode is done."""
    results = []
    while not ep.done:
        turn = len(ep.turns)
        got = backend.generate([GenRequest(ep.task.name, ep.prompt, sample_idxs=(turn,))], SamplingParams())
        (gen,) = got[ep.task.name]
        results.append(env.step(ep, gen.text, output_tokens=gen.output_tokens))
    return results


def test_replay_episode_fails_then_succeeds_through_the_pool(tmp_path, gelu_task, wrong, good, pool_verifier):
    backend = load_backend(f"replay:{replay_file(tmp_path, gelu_task.name, [wrong, good])}")
    env = KernelEnv(backend="triton", max_turns=4, reward="correctness", verifier=pool_verifier)
    ep = env.reset(gelu_task)
    assert [m["role"] for m in ep.prompt] == ["system", "user"]
    first, second = play(env, ep, backend)
    assert first.verdict.status == "mismatch" and first.reward == 0.0 and not first.done
    assert "mismatch" in first.observation and "worst at" in first.observation
    assert "No profile was taken" in first.observation  # CPU: nothing was timed
    assert "gelu_kernel x1" in first.observation  # the candidate's own kernel and its launches
    assert second.verdict.status == "correct" and second.reward == 1.0
    assert second.done and second.done_reason == "correct" and ep.done
    assert [t.output_tokens for t in ep.turns] == [100, 101]
    assert ep.best_turn() == 1 and ep.solved
    assert "def gelu_kernel" in ep.turns[1].code and "```" not in ep.turns[1].code
    # the second prompt carried the first attempt and its observation
    ep2 = Episode(gelu_task, "triton", turns=ep.turns[:1])
    roles = [m["role"] for m in ep2.prompt]
    assert roles == ["system", "user", "assistant", "user"]
    assert ep2.prompt[2]["content"] == wrong and first.observation in ep2.prompt[3]["content"]
    assert env.samples_used == 2


def test_episode_resumes_from_its_json(scripted):
    env = KernelEnv(max_turns=3, verifier=scripted.verifier())
    ep = env.reset(TASK, episode_id="toy#0")
    env.step(ep, "@mismatch")
    saved = json.loads(json.dumps(ep.to_dict()))
    back = Episode.from_dict(saved)
    assert back == ep and back.prompt == ep.prompt and back.turns[0].verdict == ep.turns[0].verdict
    fresh = KernelEnv(max_turns=3, verifier=scripted.verifier(), sample_budget=2)
    fresh.restore([back])
    assert fresh.budget_left == 1
    res = fresh.step(back, "@correct")
    assert res.done and res.done_reason == "correct" and [t.reward for t in back.turns] == [0.0, 1.0]
    with pytest.raises(ValueError, match="unknown fields"):
        Episode.from_dict({**saved, "surprise": 1})
    with pytest.raises(ValueError, match="follow-up prompt"):
        Episode.from_dict({**saved, "follow_up_version": "env-v0"})


def test_step_many_is_one_verification_batch_with_duplicates_verified_once(scripted):
    env = KernelEnv(max_turns=2, verifier=scripted.verifier())
    eps = [env.reset(TASK, episode_id=str(i)) for i in range(3)]
    results = env.step_many(eps, ["@mismatch", "@correct", "@mismatch"])
    assert scripted.batches == [["@mismatch", "@correct"]]  # one call; the repeated completion verified once
    assert [r.verdict.status for r in results] == ["mismatch", "correct", "mismatch"]
    assert [ep.done for ep in eps] == [False, True, False]
    results = env.step_many([eps[0], eps[2]], ["@timeout", "@correct"])
    assert [r.done_reason for r in results] == ["max_turns", "correct"]
    assert env.samples_used == 5


def test_budget_stops_verification_and_ends_episodes(scripted):
    env = KernelEnv(max_turns=4, verifier=scripted.verifier(), sample_budget=3)
    eps = [env.reset(TASK, episode_id=str(i)) for i in range(2)]
    env.step_many(eps, ["@mismatch", "@mismatch"])
    results = env.step_many(eps, ["@mismatch", "@correct"])
    assert scripted.batches[-1] == ["@mismatch"]  # only the budget's last sample was verified
    assert results[0].verdict.status == "mismatch" and results[0].done_reason == "budget"
    assert results[1].verdict is None and results[1].reward == 0.0 and results[1].done_reason == "budget"
    assert "budget of 3" in results[1].observation and eps[1].turns[-1].verdict is None
    assert env.budget_left == 0 and all(ep.done for ep in eps)


def test_turn_limit_and_stepping_a_done_episode(scripted):
    env = KernelEnv(max_turns=2, verifier=scripted.verifier())
    ep = env.reset(TASK)
    assert not env.step(ep, "@mismatch").done
    res = env.step(ep, "@compile_error")
    assert res.done and res.done_reason == "max_turns" and ep.best_turn() == 0
    with pytest.raises(ValueError, match="is done"):
        env.step(ep, "@correct")


def test_keep_refining_after_correct(scripted):
    env = KernelEnv(max_turns=3, reward="speedup", verifier=scripted.verifier(), stop_on_correct=False)
    ep = env.reset(TASK)
    assert env.step(ep, "@correct:1.5").reward == 1.5
    assert "Make it faster" in ep.prompt[-1]["content"]
    env.step(ep, "@correct:3.0")
    env.step(ep, "@mismatch")
    assert ep.done_reason == "max_turns" and ep.best_turn() == 1 and env.score(ep) == 3.0


def test_bad_arguments_fail_clearly(scripted):
    with pytest.raises(ValueError, match="unknown reward 'pass'; choose one of correctness, speedup, ca_grpo"):
        KernelEnv(reward="pass", verifier=scripted.verifier())
    with pytest.raises(ValueError, match="unknown backend"):
        KernelEnv(backend="ptx", verifier=scripted.verifier())
    with pytest.raises(ValueError, match="max_turns"):
        KernelEnv(max_turns=0, verifier=scripted.verifier())
    with pytest.raises(ValueError, match="unknown history"):
        KernelEnv(history="some", verifier=scripted.verifier()).reset(TASK)
    env = KernelEnv(verifier=scripted.verifier())
    ep = env.reset(TASK)
    with pytest.raises(ValueError, match="1 episodes but 2 completions"):
        env.step_many([ep], ["a", "b"])
    with pytest.raises(ValueError, match="appears twice"):
        env.step_many([ep, ep], ["a", "b"])
    short = Verifier(lambda items: [], name="short")
    with pytest.raises(RuntimeError, match="returned 0 verdicts for 1"):
        KernelEnv(verifier=short).step(env.reset(TASK), "x")


def test_group_rewards_score_each_episode_by_its_best_turn(scripted):
    env = KernelEnv(max_turns=2, reward="ca_grpo", verifier=scripted.verifier())
    eps = [env.reset(TASK, episode_id=str(i)) for i in range(4)]
    env.step_many(eps, ["@mismatch", "@correct:2.0", "@mismatch", "@mismatch"])
    env.step_many([eps[0], eps[2], eps[3]], ["@correct", "@mismatch", "@timeout"])
    assert [ep.best_turn() for ep in eps] == [1, 0, 0, 0]
    assert env.group_rewards(eps) == [1.0, 1.05, 0.0, 0.0]  # 2 of 4 correct: gate open, S = log2(2)/log2(4)
    assert KernelEnv(reward="correctness", verifier=scripted.verifier()).group_rewards(eps) == [1.0, 1.0, 0.0, 0.0]
    other = env.reset(Task("other", "import torch\n", suite="s"))
    with pytest.raises(ValueError, match="one task"):
        env.group_rewards([eps[0], other])


def test_profiler_is_asked_only_for_timed_kernels(scripted):
    asked = []

    def profiler(items):
        asked.extend(code for _, code, _ in items)
        return [[KernelTime("gelu_kernel", 0.75, 2), KernelTime("copy_kernel", 0.25)] for _ in items]

    env = KernelEnv(max_turns=2, verifier=scripted.verifier(), profiler=profiler, stop_on_correct=False)
    eps = [env.reset(TASK, episode_id=str(i)) for i in range(2)]
    res = env.step_many(eps, ["@correct:1.25", "@mismatch"])
    assert asked == ["@correct:1.25\n"]
    assert "Device time by kernel" in res[0].observation and "75.0%  gelu_kernel (x2)" in res[0].observation
    assert "1.25x eager" in res[0].observation
    assert "No profile was taken (the kernel was not timed" in res[1].observation
    unprofiled = KernelEnv(verifier=scripted.verifier()).step(
        KernelEnv(verifier=scripted.verifier()).reset(TASK), "@correct:2"
    )
    assert "no profiler is configured" in unprofiled.observation


def test_history_last_keeps_only_the_latest_attempt(scripted):
    env = KernelEnv(max_turns=4, verifier=scripted.verifier(), history="last")
    ep = env.reset(TASK)
    env.step(ep, "@mismatch ATTEMPT-ONE")
    env.step(ep, "@timeout second")
    contents = [m["content"] for m in ep.prompt]
    assert len(contents) == 4 and contents[2] == "@timeout second" and "ATTEMPT-ONE" not in "".join(contents)


def test_best_turn_prefers_correct_then_faster_then_earlier():
    ep = Episode(TASK, "triton")
    assert ep.best_turn() is None
    from kernelzero.env import Turn

    for status, speed in [("mismatch", None), ("correct", 1.2), ("correct", 1.8), ("correct", 1.8)]:
        ep.turns.append(Turn("x", "x", make_verdict(status, speedup=speed), 0.0))
    assert ep.best_turn() == 2


def test_docstring_examples_hold():
    import doctest

    from kernelzero.env import scoring
    from kernelzero.env.adapters import verl

    assert doctest.testmod(scoring).failed == 0 and doctest.testmod(scoring).attempted >= 8
    assert doctest.testmod(verl).failed == 0 and doctest.testmod(verl).attempted == 1


def test_episode_through_the_http_service(tmp_path, gelu_task):
    """A real `kernelzero serve` (token required): one step_many batch is one POST; answers rejected before any run
    keep the test fast."""
    pytest.importorskip("fastapi")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
    try:
        import serving
    finally:
        sys.path.pop(0)
    (tmp_path / "token").write_text("env-token\n")
    port = serving.free_port()
    proc = serving.start(
        tmp_path / "service.sqlite", port, tmp_path / "tmp", "--jobs", "1", "--token-file", str(tmp_path / "token")
    )
    try:
        env = KernelEnv(
            max_turns=2, verifier=Verifier.http(f"http://127.0.0.1:{port}", token="env-token", timeout_s=120)
        )
        eps = [env.reset(gelu_task, episode_id=str(i)) for i in range(2)]
        results = env.step_many(eps, ["no code here, sorry", "```python\n" + serving.NO_KERNEL + "```"])
        assert [r.verdict.status for r in results] == ["format_error", "no_kernel"]
        assert "ModelNew" in results[0].observation and not any(r.done for r in results)
        status, text = serving.raw(f"http://127.0.0.1:{port}/metrics", token="env-token")
        assert 'kernelzero_jobs{state="done"} 2' in text
        bad = KernelEnv(verifier=Verifier.http(f"http://127.0.0.1:{port}", token="wrong"))
        lost = bad.reset(gelu_task)
        with pytest.raises(Exception, match="401|403"):
            bad.step(lost, "x")
        assert lost.turns == [] and bad.samples_used == 0  # a failed verification records nothing
    finally:
        serving.stop(proc)
