"""OpenRLHF's reward function: `reward_func(queries, prompts, labels)` verifies each sample's kernel.

In a file passed as `--reward.remote_url kz_reward.py` (older releases: `--remote_rm_url`), with the dataset's
task column as `--label_key`:

    from kernelzero.env import Verifier
    from kernelzero.env.adapters.openrlhf import OpenRLHFReward
    reward_func = OpenRLHFReward(Verifier.http("http://gpu-host:8765"), backend="triton")

OpenRLHF passes `queries` (prompt and response as one decoded text), `prompts` (the prompt texts) and `labels`
(the label column), usually one sample per call. The response is the query with its prompt cut off (a query that
does not start with its prompt is an error: the last code block of the prompt, the worked example, must never be
verified in place of a response). Each label is the task as JSON (`adapters.common.task_label`) or a task name of
`tasks`. It returns `rewards` (the environment's turn reward), `scores` (c_i, in [0, 1], for dynamic filtering)
and `extra_logs` (c_i and S_i, the normalised speedup), as torch tensors.

CA-GRPO's gate needs the whole group, which a per-sample call cannot see: OpenRLHF has no estimator registry, so
the gate goes into its advantage computation (`compute_advantages_and_returns`), grouping by
`n_samples_per_prompt` and applying `verl.ca_grpo_scores` to the logged c_i and S_i (README shows it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelzero.env.adapters.common import SampleScorer


def response_of(query: str, prompt: str) -> str:
    """The response part of an OpenRLHF query (prompt + response)."""
    if not query.startswith(prompt):
        raise ValueError("an OpenRLHF query does not start with its prompt; cannot cut out the response")
    return query[len(prompt) :]


class OpenRLHFReward(SampleScorer):
    """An OpenRLHF `reward_func` backed by a kernelzero `Verifier` (`SampleScorer(verifier, backend, reward,
    tasks)`)."""

    __name__ = "reward_func"

    def scores(self, queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> list[dict[str, Any]]:
        """Per-sample score dicts (adapters.common.sample_scores), verified in one batch."""
        if not (len(queries) == len(prompts) == len(labels)):
            raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels differ")
        return self.score_texts([response_of(q, p) for q, p in zip(queries, prompts)], labels)

    def __call__(self, queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
        import torch

        found = self.scores(queries, prompts, labels)
        as_tensor = lambda key: torch.tensor([s[key] for s in found], dtype=torch.float32)
        return {
            "rewards": as_tensor("score"),
            "scores": as_tensor("correct"),
            "extra_logs": {"kz_correct": as_tensor("correct"), "kz_speedup_score": as_tensor("speedup_score")},
        }
