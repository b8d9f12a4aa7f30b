"""TRL (1.16) multi-turn GRPO: a `rollout_func` that plays whole episodes, and the reward that scores them.

    from kernelzero.env import KernelEnv, Verifier
    from kernelzero.env.adapters.trl import KernelRollout, episode_reward
    env = KernelEnv(backend="triton", max_turns=3, reward="ca_grpo", verifier=Verifier.pool(jobs=4))
    rollout = KernelRollout(env, tasks)
    trainer = GRPOTrainer(model, reward_funcs=[episode_reward(env, group_size=8)], args=GRPOConfig(num_generations=8, ...),
                          train_dataset=Dataset.from_list(rollout.dataset_rows()), rollout_func=rollout)

TRL calls `rollout_func(prompts, trainer)` with this process's prompts (each already repeated `num_generations`
times, contiguously) and expects `prompt_ids`, `completion_ids` and `logprobs`; other keys reach the reward
functions as columns. `KernelRollout` resets one episode per prompt (the prompt is matched to its task by content,
so the dataset's prompts must be `dataset_rows()`'s), then for up to `max_turns` turns generates a completion for
every live episode, steps them all in one verification batch, and appends the observation. Each row's completion
is the whole exchange after the prompt: the model's turns (`env_mask` 1, trained) and the observations rendered
by the chat template (`env_mask` 0, not trained: TRL masks them out of the loss).

Generation: by default the trainer's own model with `generate()` (what TRL does without vLLM; fine for tests and
small runs); pass `generate=` a function `(list of chat messages, trainer) -> list[Generated]` to use vLLM or a
server (return the sampled tokens' logprobs there, for TRL's importance-sampling correction).

Rewards: `episode_reward(env, group_size)` reads the episodes the rollout returned (column `kz_episode`): each
scored by its best turn; with `reward="ca_grpo"` the gate is computed over each run of `group_size` consecutive
rows, so every process must hold whole groups: `(per_device_train_batch_size * steps_per_generation) %
num_generations == 0` (always true with one process; a run of rows that spans two tasks raises).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelzero.env.core import KernelEnv
from kernelzero.env.episode import Episode
from kernelzero.types import Task


@dataclass(frozen=True)
class Generated:
    """One generated turn: its text, its token ids, and their logprobs when the generator has them."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None = None


Generate = Callable[[list[list[dict[str, str]]], Any], list[Generated]]


def _key(messages: Sequence[dict[str, Any]]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in messages])


def transformers_generate(batch: list[list[dict[str, str]]], trainer: Any) -> list[Generated]:
    """Generate one turn per conversation with the trainer's model (sampling as its GRPOConfig says)."""
    import torch

    tok = trainer.processing_class
    model = trainer.accelerator.unwrap_model(trainer.model)
    args = trainer.args
    out = []
    for messages in batch:  # one at a time: prompts of a multi-turn batch differ a lot in length
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        input_ids = torch.tensor([list(ids)], device=model.device)
        with torch.no_grad():
            seq = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=args.max_completion_length,
                do_sample=True,
                temperature=args.temperature,
                pad_token_id=tok.pad_token_id,
            )
        new = seq[0, input_ids.shape[1] :].tolist()
        out.append(Generated(tok.decode(new, skip_special_tokens=True), new))
    return out


def observation_ids(
    tokenizer: Any, before: list[dict[str, str]], out: Generated, after: list[dict[str, str]]
) -> list[int]:
    """Token ids the chat template puts after the model's turn `out` and before its next one: the end of the
    assistant message (less the end-of-turn token the model emitted itself) and the observation as a user turn."""
    prefix = tokenizer.apply_chat_template(before, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(after, add_generation_prompt=True, tokenize=False)
    if not full.startswith(prefix + out.text):
        raise ValueError("the chat template renders a conversation differently once it grows; cannot splice turns")
    rest = full[len(prefix) + len(out.text) :]
    eos = tokenizer.eos_token
    if eos and out.token_ids and out.token_ids[-1] == tokenizer.eos_token_id and rest.startswith(eos):
        rest = rest[len(eos) :]
    return list(tokenizer(rest, add_special_tokens=False)["input_ids"])


class KernelRollout:
    """A TRL `rollout_func` playing multi-turn kernel episodes (see the module docstring)."""

    def __init__(self, env: KernelEnv, tasks: Sequence[Task], generate: Generate | None = None):
        if env.history != "full":
            raise ValueError("KernelRollout needs history='full': each turn must extend the previous conversation")
        self.env = env
        self.generate = generate or transformers_generate
        self.tasks: dict[str, Task] = {}
        for task in tasks:
            key = _key(env.reset(task).prompt)
            if key in self.tasks and self.tasks[key] != task:
                raise ValueError(f"tasks {self.tasks[key].name!r} and {task.name!r} have the same prompt")
            self.tasks[key] = task

    def dataset_rows(self) -> list[dict[str, Any]]:
        """One row per task: the first prompt (conversational) and the task's name."""
        return [{"prompt": self.env.reset(t).prompt, "task": t.name} for t in self.tasks.values()]

    def task_for(self, prompt: Sequence[dict[str, Any]]) -> Task:
        task = self.tasks.get(_key(prompt))
        if task is None:
            raise ValueError("a prompt matches no task of this rollout; build the dataset with dataset_rows()")
        return task

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        """Long because it keeps four per-row token lists in step while the episodes advance turn by turn."""
        tok = trainer.processing_class
        episodes = [self.env.reset(self.task_for(p), episode_id=f"row{i}") for i, p in enumerate(prompts)]
        prompt_ids = [
            list(tok.apply_chat_template(ep.prompt, add_generation_prompt=True, tokenize=True, return_dict=False))
            for ep in episodes
        ]
        completion_ids: list[list[int]] = [[] for _ in episodes]
        env_mask: list[list[int]] = [[] for _ in episodes]
        logprobs: list[list[float]] = [[] for _ in episodes]
        have_logprobs = True
        while True:
            live = [i for i, ep in enumerate(episodes) if not ep.done]
            if not live:
                break
            outs = self.generate([episodes[i].prompt for i in live], trainer)
            if len(outs) != len(live):
                raise RuntimeError(f"the generator returned {len(outs)} completions for {len(live)} conversations")
            before = {i: episodes[i].prompt for i in live}
            results = self.env.step_many(
                [episodes[i] for i in live], [o.text for o in outs], output_tokens=[len(o.token_ids) for o in outs]
            )
            for i, out, res in zip(live, outs, results):
                completion_ids[i] += out.token_ids
                env_mask[i] += [1] * len(out.token_ids)
                have_logprobs = have_logprobs and out.logprobs is not None
                logprobs[i] += out.logprobs or [0.0] * len(out.token_ids)
                if not res.done:  # the observation becomes context for the next turn
                    extra = observation_ids(tok, before[i], out, episodes[i].prompt)
                    completion_ids[i] += extra
                    env_mask[i] += [0] * len(extra)
                    logprobs[i] += [0.0] * len(extra)
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs if have_logprobs else None,
            "env_mask": env_mask,
            "kz_episode": [ep.to_dict() for ep in episodes],
        }


def episode_reward(env: KernelEnv, group_size: int) -> Callable[..., list[float | None]]:
    """A TRL reward function scoring the rollout's episodes (column `kz_episode`) as `env` scores them (None for an
    episode whose best verdict is not the candidate's: TRL gives it no advantage)."""

    def kernel_episode_reward(
        prompts: list, completions: list, kz_episode: list[dict], **kwargs: Any
    ) -> list[float | None]:
        episodes = [Episode.from_dict(d) for d in kz_episode]
        if env.reward != "ca_grpo":
            return [env.score(ep) for ep in episodes]
        if len(episodes) % group_size:
            raise ValueError(
                f"{len(episodes)} episodes are not whole groups of {group_size} (see the module docstring)"
            )
        rewards: list[float | None] = []
        for start in range(0, len(episodes), group_size):
            rewards += env.group_rewards(episodes[start : start + group_size])
        return rewards

    return kernel_episode_reward
