"""Episodes of the kernel environment: a task, the turns so far, and the prompt for the next turn.

    ep = Episode(task, "triton", max_turns=4)
    ep.prompt                                  # chat messages: the one-shot prompt, then attempts and observations
    ep.turns.append(Turn(completion, code, verdict, reward, output_tokens, observation))
    Episode.from_dict(json.loads(json.dumps(ep.to_dict())))   # the same episode (prompt included)

An episode holds everything needed to continue it, so a run can stop and resume from its JSON: the task (source and
sizes), the turns with their verdicts and observations, whether it is done and why. The prompt is rebuilt from
them, never stored: the first two messages are `coder.prompts.build_messages(task, backend)`; every turn adds the
assistant's completion and a user message with the observation (`follow_up`). With `history="last"` only the
latest attempt is kept after the first prompt, so long episodes fit a short context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelzero.coder.prompts import build_messages
from kernelzero.env.scoring import best_turn, correct
from kernelzero.types import Task, Verdict, from_dict, to_dict, verdict_from_dict

HISTORIES = ("full", "last")
DONE_REASONS = ("correct", "max_turns", "budget")
# Bump on any change to `follow_up`'s text (the first turn's prompt is versioned by coder.prompts.PROMPT_VERSIONS).
FOLLOW_UP_VERSION = "env-v1"


def follow_up(observation: str, was_correct: bool) -> str:
    """The user message after a turn: what the verifier said, then what to do next."""
    if was_correct:
        ask = "It is correct. Make it faster while keeping it correct."
    else:
        ask = "Fix the problem."
    return (
        f"Your answer was verified.\n\n{observation.strip()}\n\n{ask} Answer with the complete module, "
        "`ModelNew` and its kernels, in one ```python block."
    )


@dataclass
class Turn:
    """One attempt of an episode: what the model wrote and what the verifier said."""

    completion: str  # the raw completion text
    code: str  # the code extracted from it (extract.extract_code)
    verdict: Verdict | None  # the verifier's verdict (None: not verified, the sample budget was spent)
    reward: float  # the step's reward (env/scoring.py turn_reward)
    output_tokens: int | None = None  # completion tokens, as the generator counted them
    observation: str = ""  # the feedback text shown to the model for the next turn

    def to_dict(self) -> dict[str, Any]:
        return {
            "completion": self.completion,
            "code": self.code,
            "verdict": None if self.verdict is None else to_dict(self.verdict),
            "reward": self.reward,
            "output_tokens": self.output_tokens,
            "observation": self.observation,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        data = dict(data)
        if data.get("verdict") is not None:
            data["verdict"] = verdict_from_dict(data["verdict"])  # tuples again, so a JSON round trip is exact
        return cls(**data)


@dataclass
class Episode:
    """One task worked on over several turns (mutable: `KernelEnv.step` appends turns)."""

    task: Task  # the reference problem
    backend: str  # "triton" or "cuda": the kernel language asked for
    max_turns: int = 4  # turns at most
    history: str = "full"  # "full": every turn in the prompt; "last": the first prompt and the latest turn only
    turns: list[Turn] = field(default_factory=list)  # the attempts so far, in order
    done: bool = False  # no more turns may be taken
    done_reason: str = ""  # one of DONE_REASONS once done
    episode_id: str = ""  # the caller's name for it (e.g. "level1/19_ReLU#3"), kept in to_dict

    def __post_init__(self) -> None:
        if self.history not in HISTORIES:
            raise ValueError(f"unknown history {self.history!r}; choose one of {', '.join(HISTORIES)}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")

    @property
    def prompt(self) -> list[dict[str, str]]:
        """Chat messages for the next turn (system, user, then assistant/user pairs of earlier turns)."""
        messages = build_messages(self.task, self.backend)
        shown = self.turns if self.history == "full" else self.turns[-1:]
        for turn in shown:
            messages.append({"role": "assistant", "content": turn.completion})
            messages.append({"role": "user", "content": follow_up(turn.observation, bool(correct(turn.verdict)))})
        return messages

    def best_turn(self) -> int | None:
        """Index of the best turn: correct first, then the fastest, then the earliest; None without turns."""
        return best_turn([t.verdict for t in self.turns])

    @property
    def solved(self) -> bool:
        """Some turn is correct (strict policy)."""
        return any(correct(t.verdict) for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; `Episode.from_dict` rebuilds the episode exactly."""
        return {
            "task": to_dict(self.task),
            "backend": self.backend,
            "max_turns": self.max_turns,
            "history": self.history,
            "turns": [t.to_dict() for t in self.turns],
            "done": self.done,
            "done_reason": self.done_reason,
            "episode_id": self.episode_id,
            "follow_up_version": FOLLOW_UP_VERSION,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        """The episode `to_dict` wrote; a dict from another prompt version or with unknown keys is refused."""
        data = dict(data)
        version = data.pop("follow_up_version", FOLLOW_UP_VERSION)
        if version != FOLLOW_UP_VERSION:
            raise ValueError(
                f"episode written with follow-up prompt {version!r}; this kernelzero writes {FOLLOW_UP_VERSION!r}"
            )
        known = {"task", "backend", "max_turns", "history", "turns", "done", "done_reason", "episode_id"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Episode: unknown fields {unknown}")
        task = from_dict(Task, data.pop("task"))
        turns = [Turn.from_dict(t) for t in data.pop("turns", [])]
        return cls(task=task, turns=turns, **data)
