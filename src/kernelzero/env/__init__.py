"""The kernel environment: multi-turn refinement of a kernel with the verifier's feedback, for RL and evaluation.

    from kernelzero.env import KernelEnv, Episode, StepResult, Turn, Verifier
    from kernelzero.verify import options_for

    env = KernelEnv(backend="triton", max_turns=4, reward="correctness",        # or "ca_grpo", "speedup"
                    verifier=Verifier.pool(options_for("default", policy="strict"), jobs=2),
                    sample_budget=None)                                        # or Verifier.http(url, token=...)
    ep = env.reset(task)                     # Episode; ep.prompt: the chat messages for the next turn
    [res] = env.step_many([ep], [completion], output_tokens=[812])            # one verification batch
    res.observation, res.reward, res.done, res.verdict, res.done_reason      # ep was updated in place
    res = env.step(ep, completion)                                           # one episode, same thing
    ep.turns[-1]                             # Turn: completion, code, verdict, reward, output_tokens, observation
    ep.best_turn()                           # index of the best turn (correct first, then speedup); None: no turns
    Episode.from_dict(ep.to_dict())          # JSON-safe; stepping resumes from it (env.restore counts the budget)
    env.group_rewards(episodes)              # G episodes of one task, each scored by its best turn

An **episode** is one task worked on over up to `max_turns` turns. `reset(task)` gives the first prompt, the Coder's
one-shot prompt (`coder.prompts.build_messages`). Each step verifies one completion and appends a `Turn`; the next
prompt is the conversation so far (`history="full"`) or the first prompt plus the latest attempt only
(`history="last"`), with the **observation** as the next user message: the verdict's feedback (compiler errors,
the worst mismatch, a hint), the timing against the reference when there is one, the candidate's kernels and how
often each launched, and, when a GPU timing exists and a `profiler` is given, which kernels dominate the time (on
CPU the observation says that no profile was taken). `env/observe.py` writes it. The verifier's profiled run,
`kernelzero.verify.profile.profiler(opts)`, is the profiler `kernelzero eval --turns` and `kernelzero optimize`
pass on a GPU.

An episode is **done** when a turn is correct (`stop_on_correct=True`, the default; False keeps refining for
speed), after `max_turns` turns, or when the environment's `sample_budget` (completions verified, over all
episodes) is spent: a completion past the budget is not verified (it is kept as a Turn with `verdict=None`; its
StepResult has `done_reason="budget"`). Stepping a done episode raises ValueError; a verification (or profiled
run) that raises records nothing and gives its budget back, so the same step can be retried.

**Rewards** (`reward=`, env/scoring.py): `correctness` is c_i (1 when the verdict is `correct` under the strict
policy); `speedup` is c_i times the speedup over eager (1.0 for a correct kernel that was not timed, capped at
`cap`); `ca_grpo` is c_i per step, because CA-GRPO's gate needs the whole group: `group_rewards(episodes)` gives
`rewards.ca_grpo_rewards` over G episodes of one task, each scored by its best turn (for the other two rewards it
gives each episode's best-turn reward).

**Verification** goes through a `Verifier` (env/verifier.py): `Verifier.pool(options, jobs=..., store=...)` (the
local or Ray pool, `service.pool.verify_many`) or `Verifier.http(url, token=...)` (the service, one POST per batch).
`step_many` sends all its completions in one batch.

The run folder of episodes stepped turn by turn (per-turn logs, request keys, resuming) is env/runlog.py, which
`kernelzero eval --turns` and `kernelzero optimize` share.

Adapters for RL engines live in `kernelzero.env.adapters` (TRL's `rollout_func`, Prime Intellect `verifiers`, verl
`compute_score`, OpenRLHF `reward_func`); README's "The kernel environment and RL-engine adapters" shows each.
"""

from __future__ import annotations

from kernelzero.env.core import KernelEnv, StepResult
from kernelzero.env.episode import Episode, Turn
from kernelzero.env.observe import KernelTime, Profiler
from kernelzero.env.scoring import REWARDS
from kernelzero.env.verifier import Verifier

__all__ = ["REWARDS", "Episode", "KernelEnv", "KernelTime", "Profiler", "StepResult", "Turn", "Verifier"]
