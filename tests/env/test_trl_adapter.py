"""The TRL adapter: a real GRPOTrainer step (tiny local model, CPU) whose rollouts are multi-turn kernel episodes.

The completions are scripted (a random tiny model writes no kernels) but everything else is real: TRL calls
`KernelRollout` as its `rollout_func`, the kernels are verified through the pool, the observations are spliced
into the token stream with `env_mask` 0, and TRL calls `episode_reward` with the rollout's columns.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/env/test_trl_adapter.py`
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

from env_helpers import ScriptedVerifier  # noqa: E402

from kernelzero.env import Episode, KernelEnv  # noqa: E402
from kernelzero.env.adapters.trl import Generated, KernelRollout, episode_reward, observation_ids  # noqa: E402
from kernelzero.types import Task  # noqa: E402


def tiny_policy(texts):
    from kernelzero.train.config import ModelConfig
    from kernelzero.train.tiny import build_model, build_tokenizer

    tok = build_tokenizer(texts, vocab_size=600)
    return build_model(
        ModelConfig(hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, max_positions=16384), tok
    ), tok


class Script:
    """A generator that answers turn t of every live episode with `turns[t]` (one completion per episode)."""

    def __init__(self, tok, turns: list[list[str]]):
        self.tok, self.turns, self.calls = tok, turns, []

    def __call__(self, batch, trainer):
        texts = self.turns[len(self.calls)][: len(batch)]
        self.calls.append(len(batch))
        ids = lambda t: self.tok(t, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
        return [Generated(t, ids(t)) for t in texts]


def test_grpo_trainer_step_with_multi_turn_rollouts(tmp_path, gelu_task, wrong, good, pool_verifier):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    env = KernelEnv(backend="triton", max_turns=2, reward="ca_grpo", verifier=pool_verifier)
    rollout = KernelRollout(env, [gelu_task])
    rows = rollout.dataset_rows()
    model, tok = tiny_policy([m["content"] for m in rows[0]["prompt"]] + [wrong, good])
    # episode 0: wrong, then right; episode 1: wrong twice
    rollout.generate = Script(tok, [[wrong, wrong], [good, wrong]])
    seen = {}
    reward = episode_reward(env, group_size=2)

    def recorded(prompts, completions, **kwargs):
        seen["episodes"] = kwargs["kz_episode"]
        seen["rewards"] = reward(prompts, completions, **kwargs)
        return seen["rewards"]

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=16,
        max_steps=1,
        logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[recorded],
        args=args,
        train_dataset=Dataset.from_list(rows * 2),
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.train()
    assert rollout.generate.calls == [2, 2]
    episodes = [Episode.from_dict(d) for d in seen["episodes"]]
    assert [[t.verdict.status for t in ep.turns] for ep in episodes] == [
        ["mismatch", "correct"],
        ["mismatch", "mismatch"],
    ]
    assert seen["rewards"] == env.group_rewards(episodes) == [1.0, 0.0]
    assert trainer.state.global_step == 1


def test_rollout_tokens_mask_the_observations(scripted: ScriptedVerifier):
    env = KernelEnv(max_turns=3, verifier=scripted.verifier())
    task = Task("toy", "import torch\nclass Model: pass\n", suite="s")
    rollout = KernelRollout(env, [task])
    prompt = rollout.dataset_rows()[0]["prompt"]
    _, tok = tiny_policy([m["content"] for m in prompt] + ["@mismatch", "@correct"])
    rollout.generate = Script(tok, [["@mismatch a"], ["@correct b"]])

    class Trainer:  # the attributes of GRPOTrainer that the rollout reads
        processing_class = tok

    out = rollout([prompt], Trainer())
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "kz_episode"}
    assert out["logprobs"] is None  # the script has none; TRL then skips its importance-sampling correction
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    assert len(ids) == len(mask)
    model_part = tok.decode([i for i, m in zip(ids, mask) if m])
    env_part = tok.decode([i for i, m in zip(ids, mask) if not m])
    assert model_part.replace(tok.eos_token, "") == "@mismatch a@correct b"
    assert "Your answer was verified." in env_part and "mismatch: details" in env_part
    # prompt + completion tokens are exactly the chat template's rendering of the whole conversation
    ep = Episode.from_dict(out["kz_episode"][0])
    whole = tok.apply_chat_template(ep.prompt[:-1], tokenize=False)
    assert tok.decode(out["prompt_ids"][0] + ids) == whole.rstrip("\n")
    with pytest.raises(ValueError, match="matches no task"):
        rollout([[{"role": "user", "content": "something else"}]], Trainer())


def test_rollout_refuses_a_short_history_and_splicing_errors(scripted: ScriptedVerifier):
    with pytest.raises(ValueError, match="history='full'"):
        KernelRollout(KernelEnv(verifier=scripted.verifier(), history="last"), [])

    class Tok:  # a template that rewrites earlier turns
        eos_token, eos_token_id = "</s>", 0

        def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=False):
            return f"{len(messages)}:" + "|".join(m["content"] for m in messages)

    with pytest.raises(ValueError, match="cannot splice"):
        observation_ids(
            Tok(), [{"role": "user", "content": "a"}], Generated("b", [5]), [{"role": "user", "content": "a"}] * 3
        )


def test_default_generator_uses_the_trainers_model(scripted: ScriptedVerifier):
    from types import SimpleNamespace

    env = KernelEnv(max_turns=2, verifier=scripted.verifier())
    task = Task("toy", "import torch\nclass Model: pass\n", suite="s")
    rollout = KernelRollout(env, [task])  # no generate=: transformers_generate with the trainer's model
    prompt = rollout.dataset_rows()[0]["prompt"]
    model, tok = tiny_policy([m["content"] for m in prompt])
    trainer = SimpleNamespace(
        processing_class=tok,
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        args=SimpleNamespace(max_completion_length=4, temperature=1.0),
    )
    out = rollout([prompt, prompt], trainer)
    episodes = [Episode.from_dict(d) for d in out["kz_episode"]]
    # a random model writes no @marker: format_error twice, then the turn limit
    assert [[t.verdict.status for t in ep.turns] for ep in episodes] == [["format_error"] * 2] * 2
    for ids, mask, ep in zip(out["completion_ids"], out["env_mask"], episodes):
        assert sum(mask) == sum(t.output_tokens for t in ep.turns) and 2 <= sum(mask) <= 8
        assert len(ids) > sum(mask)  # the first observation sits between the two turns


def test_episode_reward_needs_whole_groups_of_one_task(scripted: ScriptedVerifier):
    env = KernelEnv(max_turns=1, reward="ca_grpo", verifier=scripted.verifier())
    a, b = Task("a", "import torch\n", suite="s"), Task("b", "import torch\n", suite="s")
    eps = [env.reset(t) for t in (a, a, b)]
    env.step_many(eps, ["@correct", "@mismatch", "@correct"])
    rows = [ep.to_dict() for ep in eps]
    with pytest.raises(ValueError, match="not whole groups of 2"):
        episode_reward(env, group_size=2)([], [], kz_episode=rows)
    with pytest.raises(ValueError, match="a group is episodes of one task"):
        episode_reward(env, group_size=3)([], [], kz_episode=rows)
    assert episode_reward(env, group_size=2)([], [], kz_episode=rows[:2]) == [1.0, 0.0]
    plain = KernelEnv(max_turns=1, reward="correctness", verifier=scripted.verifier())
    assert episode_reward(plain, group_size=2)([], [], kz_episode=rows) == [1.0, 0.0, 1.0]  # no group needed
