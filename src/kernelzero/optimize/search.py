"""The search of `kernelzero optimize`: best-of-N plus refinement, in waves of episodes, within a sample budget.

    episodes, notes = search(plan, env, logs, backend, advance=bar_step)

A wave starts `plan.wave` episodes of the task (`KernelEnv.reset`); each round, the live episodes at the earliest
turn get one completion each and are verified in one batch (`KernelEnv.step_many`). An episode ends when it is
correct (unless the environment keeps refining correct kernels for speed, `stop_on_correct=False`, which optimize
sets when a GPU times them) or after `plan.turns` turns. When every episode has ended and budget is left, the next
wave starts. The search stops when the budget (verified completions, counted by the environment) is spent, the
time limit passes, or the model gives no more completions (a replay file that has run out).

The records are those of a multi-turn eval run, kept by the same code (env/runlog.py), with the episode's index
as sample_idx: samples.jsonl (a Sample dict plus "turn"), verdicts.jsonl and episodes.jsonl (the episode after each
turn), keyed by (task, sample_idx, turn) and append-only. A rerun restores every episode and continues; nothing is
generated or verified twice. Generation keys are eval's (`runlog.turn_key`): turn 1 under the task's name (episode
i: the task's i-th completion), turn t >= 2 under `NAME#sample{i}#turn{t}`, one request per episode, all of a round
in one backend call; one replay file format scripts both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelzero.coder.backends.base import SamplingParams
from kernelzero.env import Episode, KernelEnv
from kernelzero.env.runlog import TurnLogs, generate_turn, latest_states, resume_episode, step_turn
from kernelzero.types import Task


@dataclass(frozen=True)
class SearchPlan:
    """What the search does; `optimize.run` builds it from the command's options."""

    task: Task  # the module to optimise, at the sizes it is optimised for
    model: str  # the model spec, recorded in each sample
    backend: str  # "triton" or "cuda"
    turns: int  # turns per episode at most
    wave: int  # episodes started together
    params: SamplingParams  # sampling (n is ignored: one completion per episode and turn)
    deadline: float  # time.monotonic() after which no new round starts


def restore(task: Task, logs: TurnLogs, env: KernelEnv) -> list[Episode]:
    """The episodes so far, in index order: each one's latest state, or a fresh one when only its first sample
    was written. Verified turns count against the environment's budget; an episode the budget ended is live again
    (a rerun may have a larger budget); a verdict line a kill lost is written again."""
    states = latest_states(logs)
    count = 1 + max([*(i for _, i in states), *(r["sample_idx"] for r in logs.samples.records())], default=-1)
    episodes = []
    for i in range(count):
        ep = resume_episode(env, task, i, states.get((task.name, i)), logs)
        verified = all(t.verdict is not None for t in ep.turns)
        if ep.done_reason == "budget" and verified and len(ep.turns) < ep.max_turns:
            ep.done, ep.done_reason = False, ""  # ended by the budget only: a larger budget continues it
        episodes.append(ep)
    env.restore(episodes)
    return episodes


def generate(
    plan: SearchPlan, episodes: Sequence[Episode], group: Sequence[int], turn: int, logs: TurnLogs, backend: Any
) -> list[str]:
    """Ask the backend for turn `turn` of the episodes in `group` that lack it; return its warnings and failures."""
    name = plan.task.name
    todo = [((name, i), episodes[i]) for i in group if (name, i, turn) not in logs.samples]
    if not todo:
        return []
    failed = generate_turn(backend, todo, turn, logs, plan.params, plan.backend, plan.model)
    lost = [f"episode {g.sample_idx} turn {turn}: {g.error}" for _, g in failed]
    return list(getattr(backend, "warnings", [])) + lost


def search(
    plan: SearchPlan, env: KernelEnv, logs: TurnLogs, backend: Any, advance: Callable[[int], None] = lambda n: None
) -> tuple[list[Episode], list[str]]:
    """Run (or resume) the search; return every episode and notes (why it stopped, what the backend lacked).

    Long because it is the loop the module docstring describes, one round per pass: stop checks, a new wave when
    nothing is live, then generate and step the live episodes at the earliest turn.
    """
    episodes = restore(plan.task, logs, env)
    notes: list[str] = []
    stalled: set[int] = set()  # episodes the backend gave no completion for this run
    while True:
        if env.budget_left == 0:
            notes.append(f"the sample budget ({env.sample_budget} verified completions) is spent")
            break
        if time.monotonic() > plan.deadline:
            notes.append("the time limit was reached")
            break
        live = [i for i, ep in enumerate(episodes) if not ep.done and i not in stalled]
        new_wave = not live
        if new_wave:
            start, size = len(episodes), min(plan.wave, env.budget_left or plan.wave)
            episodes += [env.reset(plan.task, episode_id=f"{plan.task.name}#{start + j}") for j in range(size)]
            live = list(range(start, start + size))
        turn = 1 + min(len(episodes[i].turns) for i in live)
        group = [i for i in live if len(episodes[i].turns) == turn - 1][: env.budget_left]
        notes += generate(plan, episodes, group, turn, logs, backend)
        stepped = {i for _, i in step_turn(env, [((plan.task.name, i), episodes[i]) for i in group], turn, logs)}
        stalled.update(i for i in group if i not in stepped)
        if not stepped and new_wave:
            del episodes[start:]  # nothing to start them with: not episodes of this run
            notes.append("the model gave no more completions")
            break
        if stepped:
            advance(len(stepped))
    return episodes, notes
