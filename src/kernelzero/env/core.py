"""`KernelEnv`: reset a task into an episode, step episodes with completions, score groups of episodes.

    env = KernelEnv(backend="triton", max_turns=4, reward="ca_grpo", verifier=Verifier.pool(options, jobs=2))
    episodes = [env.reset(task, episode_id=f"{task.name}#{g}") for g in range(8)]
    while not all(ep.done for ep in episodes):
        live = [ep for ep in episodes if not ep.done]
        texts, tokens = my_model.generate([ep.prompt for ep in live])
        results = env.step_many(live, texts, output_tokens=tokens)     # one verification batch
    rewards = env.group_rewards(episodes)                              # CA-GRPO over the group, best turns

The package docstring (kernelzero/env/__init__.py) describes episodes, observations, rewards and the budget.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from kernelzero.env.episode import Episode, Turn
from kernelzero.env.observe import KernelTime, Profiler, budget_text, observation
from kernelzero.env.scoring import check_reward, correct, group_rewards, turn_reward
from kernelzero.env.verifier import Verifier
from kernelzero.extract import extract_code
from kernelzero.types import Task, Verdict, is_skipped
from kernelzero.verify import get_backend


@dataclass(frozen=True)
class StepResult:
    """What one step returned for one episode (the episode itself was updated in place)."""

    observation: str  # the feedback text, also the next prompt's last user message
    reward: float  # the turn's reward (env/scoring.py turn_reward)
    done: bool  # the episode is finished
    verdict: Verdict | None  # the verifier's verdict; None when the budget was spent before this completion
    done_reason: str = ""  # "correct", "max_turns" or "budget" when done


class KernelEnv:
    """Multi-turn kernel writing with the verifier's feedback (see the package docstring)."""

    def __init__(
        self,
        backend: str = "triton",
        max_turns: int = 4,
        reward: str = "correctness",
        verifier: Verifier | None = None,
        sample_budget: int | None = None,
        *,
        stop_on_correct: bool = True,
        history: str = "full",
        alpha: float = 0.5,
        beta: float = 0.1,
        baseline: str = "eager",
        cap: float = 10.0,
        profiler: Profiler | None = None,
    ):
        get_backend(backend)  # an unknown backend fails here, listing the known ones
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if sample_budget is not None and sample_budget < 1:
            raise ValueError(f"sample_budget must be at least 1 (or None for no budget), got {sample_budget}")
        self.backend = backend
        self.max_turns = max_turns
        self.reward = check_reward(reward)
        self.verifier = verifier if verifier is not None else Verifier.pool()
        self.sample_budget = sample_budget
        self.stop_on_correct = stop_on_correct
        self.history = history
        self.alpha, self.beta, self.baseline, self.cap = alpha, beta, baseline, cap
        self.profiler = profiler
        self.samples_used = 0  # completions verified so far (the budget counts these)
        self._lock = threading.Lock()

    # -- episodes ------------------------------------------------------------------------------------------------
    def reset(self, task: Task, episode_id: str = "") -> Episode:
        """A fresh episode of `task`; its `prompt` is the Coder's one-shot prompt."""
        return Episode(task, self.backend, self.max_turns, self.history, episode_id=episode_id)

    def restore(self, episodes: Sequence[Episode]) -> None:
        """Count the verified turns of resumed episodes against the sample budget (call once after from_dict)."""
        self.samples_used += sum(1 for ep in episodes for t in ep.turns if t.verdict is not None)

    @property
    def budget_left(self) -> int | None:
        """Completions that may still be verified; None without a budget."""
        if self.sample_budget is None:
            return None
        return max(0, self.sample_budget - self.samples_used)

    # -- stepping ------------------------------------------------------------------------------------------------
    def step(self, episode: Episode, completion: str, output_tokens: int | None = None) -> StepResult:
        """One turn of one episode: `step_many` of one."""
        return self.step_many([episode], [completion], None if output_tokens is None else [output_tokens])[0]

    def step_many(
        self,
        episodes: Sequence[Episode],
        completions: Sequence[str],
        output_tokens: Sequence[int | None] | None = None,
    ) -> list[StepResult]:
        """One turn of each episode, verified in one batch; results in order, episodes updated in place.

        Completions past the sample budget are not verified (StepResult with verdict None, done_reason "budget").
        """
        tokens = list(output_tokens) if output_tokens is not None else [None] * len(episodes)
        self._check_batch(episodes, completions, tokens)
        with self._lock:  # reserve the budget first: adapters may step episodes from several threads
            left = self.budget_left
            n_run = len(episodes) if left is None else min(left, len(episodes))
            self.samples_used += n_run
        run = list(range(n_run))
        try:
            verdicts = self.verifier.verify([(episodes[i].task, completions[i], episodes[i].backend) for i in run])
            profiles = self._profiles([episodes[i] for i in run], [completions[i] for i in run], verdicts)
        except BaseException:  # nothing was recorded: give the budget back, so the same step can be retried
            with self._lock:
                self.samples_used -= n_run
            raise
        results = []
        for i, (ep, text) in enumerate(zip(episodes, completions)):
            if i < n_run:
                results.append(self._record(ep, text, tokens[i], verdicts[i], profiles[i]))
            else:
                ep.turns.append(
                    Turn(text, extract_code(text), None, 0.0, tokens[i], budget_text(self.sample_budget or 0))
                )
                ep.done, ep.done_reason = True, "budget"
                results.append(StepResult(ep.turns[-1].observation, 0.0, True, None, "budget"))
        return results

    def _check_batch(self, episodes: Sequence[Episode], completions: Sequence[str], tokens: list) -> None:
        if len(completions) != len(episodes) or len(tokens) != len(episodes):
            raise ValueError(
                f"{len(episodes)} episodes but {len(completions)} completions and {len(tokens)} token counts"
            )
        if len({id(ep) for ep in episodes}) != len(episodes):
            raise ValueError("an episode appears twice in one step_many batch; step it once per batch")
        for ep in episodes:
            if not isinstance(ep, Episode):
                raise TypeError(f"step_many takes Episodes from reset(), got {type(ep).__name__}")
            if ep.done:
                raise ValueError(
                    f"episode {ep.episode_id or ep.task.name!r} is done ({ep.done_reason}); reset a new one"
                )

    def _profiles(
        self, episodes: Sequence[Episode], completions: Sequence[str], verdicts: Sequence[Verdict]
    ) -> list[Sequence[KernelTime] | None]:
        """Profiles of the timed verdicts (a GPU ran them), None elsewhere and without a profiler."""
        out: list[Sequence[KernelTime] | None] = [None] * len(verdicts)
        timed = [i for i, v in enumerate(verdicts) if v.timing is not None]
        if self.profiler is None or not timed:
            return out
        items = [(episodes[i].task, extract_code(completions[i]), episodes[i].backend) for i in timed]
        found = list(self.profiler(items))
        if len(found) != len(items):
            raise RuntimeError(f"the profiler returned {len(found)} profiles for {len(items)} candidates")
        for i, profile in zip(timed, found):
            out[i] = profile
        return out

    def _record(
        self, ep: Episode, text: str, tokens: int | None, verdict: Verdict, profile: Sequence[KernelTime] | None
    ) -> StepResult:
        """Append the turn to the episode and decide whether it is done."""
        reward = turn_reward(verdict, self.reward, baseline=self.baseline, cap=self.cap)
        obs = observation(verdict, profile, have_profiler=self.profiler is not None)
        ep.turns.append(Turn(text, extract_code(text), verdict, reward, tokens, obs))
        if self.stop_on_correct and correct(verdict):
            ep.done, ep.done_reason = True, "correct"
        elif len(ep.turns) >= ep.max_turns:
            ep.done, ep.done_reason = True, "max_turns"
        elif self.budget_left == 0:
            ep.done, ep.done_reason = True, "budget"
        return StepResult(obs, reward, ep.done, verdict, ep.done_reason)

    # -- scoring -------------------------------------------------------------------------------------------------
    def best_verdict(self, episode: Episode) -> Verdict | None:
        """The verdict of the episode's best turn (None: no verified turn)."""
        best = episode.best_turn()
        return None if best is None else episode.turns[best].verdict

    def score(self, episode: Episode) -> float | None:
        """The episode's reward by its best turn, without a group (CA-GRPO: c_i of the best turn); None when that
        turn's verdict is not the candidate's (`infra_error`, `task_broken`)."""
        best = self.best_verdict(episode)
        if best is not None and is_skipped(best):
            return None
        return turn_reward(best, self.reward, baseline=self.baseline, cap=self.cap)

    def group_rewards(self, episodes: Sequence[Episode]) -> list[float | None]:
        """Rewards of G episodes of one task, each scored by its best turn (CA-GRPO: the gate over the group);
        None for an episode whose best verdict is skipped (env/scoring.py)."""
        names = {ep.task.key for ep in episodes}
        if len(names) > 1:
            raise ValueError(f"a group is episodes of one task; got {sorted(names)}")
        return group_rewards(
            [self.best_verdict(ep) for ep in episodes],
            self.reward,
            alpha=self.alpha,
            beta=self.beta,
            baseline=self.baseline,
            cap=self.cap,
        )
