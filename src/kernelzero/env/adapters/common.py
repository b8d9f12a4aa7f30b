"""What the one-sample adapters (verl, OpenRLHF) share: finding the task a sample is for, and per-sample scores.

    scorer = SampleScorer(Verifier.http(url), backend="triton", reward="correctness", tasks=None)
    scorer.score_texts(responses, labels)      # one score dict (`sample_scores`) per sample, verified in one batch

An engine passes each sample's "ground truth" as a string from the dataset: here, either the task as JSON
(`task_label(task)`, self-contained) or a task name looked up in the `tasks` the adapter was built with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kernelzero.env.scoring import check_reward, correct, speedup_of, turn_reward
from kernelzero.env.verifier import Verifier
from kernelzero.rewards import speedup_score
from kernelzero.types import Task, Verdict, from_dict, to_dict


def task_label(task: Task) -> str:
    """The task as a JSON string, for a dataset's label / ground-truth column."""
    return json.dumps(to_dict(task), sort_keys=True)


def resolve_task(label: Any, tasks: Mapping[str, Task] | None) -> Task:
    """The task a label names: a Task, a dict or JSON string of one, or a name in `tasks`."""
    if isinstance(label, Task):
        return label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        label = json.loads(label)
    if isinstance(label, Mapping):
        return from_dict(Task, dict(label))
    if isinstance(label, str) and tasks is not None and label in tasks:
        return tasks[label]
    known = "" if tasks is None else f"; known: {', '.join(sorted(tasks)[:10])}"
    raise ValueError(f"cannot find the task for label {str(label)[:80]!r}: give a task JSON or a known name{known}")


def sample_scores(verdict: Verdict, reward: str, baseline: str = "eager", cap: float = 10.0) -> dict[str, Any]:
    """Per-sample numbers an engine logs and a group step reads: the reward, c_i, S_i, the raw speedup, status."""
    speed = speedup_of(verdict, baseline)
    return {
        "score": turn_reward(verdict, reward, baseline=baseline, cap=cap),
        "correct": float(correct(verdict)),
        "speedup_score": speedup_score(speed),  # S_i as CA-GRPO reads it (0 when wrong or not timed)
        "speedup": 0.0 if speed is None else float(speed),
        "status": verdict.policy_status.get("strict", verdict.status),
    }


class SampleScorer:
    """A verifier, the kernel language, the reward and the known tasks: the state of a one-sample adapter."""

    def __init__(
        self,
        verifier: Verifier,
        backend: str = "triton",
        reward: str = "correctness",
        tasks: Mapping[str, Task] | None = None,
    ):
        self.verifier = verifier
        self.backend = backend
        self.reward = check_reward(reward)
        self.tasks = tasks

    def score_texts(self, texts: Sequence[str], labels: Sequence[Any]) -> list[dict[str, Any]]:
        """The score dicts (`sample_scores`) of completions `texts` for the tasks `labels` name, verified in one
        batch; the caller checks that the two have the same length."""
        tasks = [resolve_task(label, self.tasks) for label in labels]
        verdicts = self.verifier.verify([(t, text, self.backend) for t, text in zip(tasks, texts)])
        return [sample_scores(v, self.reward) for v in verdicts]
