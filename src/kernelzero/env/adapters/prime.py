"""Prime Intellect `verifiers` (0.4, the `verifiers.v1` stack): kernel tasks, and an environment that plays G
multi-turn attempts per task and scores them as a group (CA-GRPO's gate in `finalize`).

verifiers 0.4 replaced 0.3's `MultiTurnEnv` and `Rubric` with `vf.Env` (`run(task, agents)` drives the agents
turn by turn through `agent.interaction(task)`; `finalize(task, episode)` judges the finished episode's traces
together and records rewards on them) and `vf.Taskset` (yields `vf.Task`s). This module builds those classes on
first use, so kernelzero imports without verifiers installed (`pip install -e .[env]`):

    classes = verifiers_classes()
    classes.Env, classes.EnvConfig, classes.Taskset, classes.TasksetConfig

verifiers finds a taskset or an environment by the name of a module that exports the class in `__all__`; make
two one-line modules on your PYTHONPATH and name them in the config (README shows a run):

    # kz_kernels.py                                           # kz_refine.py
    from kernelzero.env.adapters.prime import KernelTaskset    from kernelzero.env.adapters.prime import KernelRefineEnv
    __all__ = ["KernelTaskset"]                                __all__ = ["KernelRefineEnv"]

`KernelTaskset` (config: `suite`, `names`, `preset`, `backend`) yields one task per kernelzero Task, its prompt the
Coder's one-shot prompt. `KernelRefineEnv` (config: `group_size`, `max_turns`, `reward`, `alpha`, `beta`,
`backend`, and `verify_url`/`verify_token`/`jobs` for the verifier) runs `group_size` attempts of each task side
by side; an attempt steps a `KernelEnv` episode with each reply and sends the observation back as the next user
turn, then writes c_i, S_i and the turn count as metrics on its trace. `finalize` reads those metrics from all
the episode's traces and records `kernel_reward`: CA-GRPO over the group (`reward="ca_grpo"`), or each attempt's
best-turn reward. What is tested: these classes built against the installed verifiers, `run` and `finalize`
called as the framework calls them, with a scripted agent in place of a served model.
"""

from __future__ import annotations

import asyncio
import functools
from types import SimpleNamespace
from typing import Any

from kernelzero.env.core import KernelEnv
from kernelzero.env.episode import Episode, follow_up
from kernelzero.env.scoring import correct, speedup_of
from kernelzero.env.verifier import Verifier
from kernelzero.rewards import ca_grpo_rewards
from kernelzero.types import Task, from_dict, to_dict

METRICS = ("kz_correct", "kz_speedup", "kz_turns")  # written on each attempt's trace; finalize reads the first two


def attempt_metrics(env: KernelEnv, episode: Episode) -> dict[str, float]:
    """c_i, the raw speedup (0: none) and the number of turns of one finished attempt, scored by its best turn."""
    verdict = env.best_verdict(episode)
    speed = speedup_of(verdict, env.baseline)
    return {
        "kz_correct": float(correct(verdict)),
        "kz_speedup": float(speed or 0.0),
        "kz_turns": float(len(episode.turns)),
    }


def group_from_metrics(
    metrics: list[dict[str, float]], reward: str, alpha: float = 0.5, beta: float = 0.1, cap: float = 10.0
) -> list[float]:
    """Rewards of a group of attempts from their trace metrics: the numbers `KernelEnv.group_rewards` gives for
    the same episodes (c_i and the raw speedup of each attempt's best turn)."""
    cs = [int(m["kz_correct"]) for m in metrics]
    speeds = [m["kz_speedup"] if m["kz_speedup"] > 0 else None for m in metrics]
    if reward == "ca_grpo":
        return ca_grpo_rewards(cs, speeds, alpha, beta)
    if reward == "speedup":
        return [float(c) * (1.0 if s is None else min(s, cap)) for c, s in zip(cs, speeds)]
    return [float(c) for c in cs]


async def play_attempt(env: KernelEnv, task: Task, interaction: Any, episode_id: str) -> Episode:
    """One multi-turn attempt over a verifiers `Interaction`: the task speaks first (a bare `turn()`), then every
    reply is verified and answered with its observation until the episode is done or the agent's run ends."""
    episode = env.reset(task, episode_id=episode_id)
    segment = await interaction.turn()
    while not segment.terminated:
        result = await asyncio.to_thread(env.step, episode, segment.last_reply)
        if result.done:
            break
        segment = await interaction.turn(follow_up(result.observation, bool(correct(result.verdict))))
    return episode


def kernel_task_fields(task: Task, backend: str) -> dict[str, Any]:
    """The fields of a verifiers task row for a kernelzero Task: prompt, system prompt, and the task itself."""
    from kernelzero.coder.prompts import build_messages

    system, user = build_messages(task, backend)
    return {
        "id": task.key,
        "name": task.name,
        "prompt": user["content"],
        "system_prompt": system["content"],
        "kz_task": to_dict(task),
        "backend": backend,
    }


@functools.cache
def verifiers_classes() -> SimpleNamespace:
    """Long because it defines, in one place, the four verifiers classes (built on first use, verifiers imported
    only then): the taskset and its config, the environment and its config."""
    import verifiers.v1 as vf

    class KernelTaskData(vf.TaskData):
        kz_task: dict[str, Any] = {}  # kernelzero.types.Task as a dict
        backend: str = "triton"

    class KernelTask(vf.Task[KernelTaskData, vf.State, vf.TaskConfig]):
        @property
        def key(self) -> str:
            return self.data.id or self.hash

    class KernelTasksetConfig(vf.TasksetConfig):
        suite: str = "kz-basic"  # a built-in suite, a folder or a JSONL file (kernelzero.tasks.load_suite)
        names: list[str] = []  # task names to keep; empty: all
        preset: str | None = None  # a size preset of the tasks ("smoke" for CPU runs)
        backend: str = "triton"

    class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
        def load(self):
            from kernelzero.tasks import load_suite, resize, select

            tasks = load_suite(self.config.suite).tasks
            if self.config.names:
                tasks = select(tasks, names=list(self.config.names))
            for task in tasks:
                if self.config.preset:
                    task = resize(task, preset=self.config.preset)
                yield KernelTask(KernelTaskData(**kernel_task_fields(task, self.config.backend)), self.config.task)

    class KernelRefineConfig(vf.EnvConfig):
        agent: vf.AgentConfig = vf.AgentConfig()
        group_size: int = 4  # attempts per task, scored as one group
        max_turns: int = 4
        reward: str = "ca_grpo"  # correctness, speedup or ca_grpo
        alpha: float = 0.5
        beta: float = 0.1
        backend: str = "triton"
        verify_url: str | None = None  # the verification service; None: the local pool
        verify_token: str | None = None
        jobs: int = 2  # local pool: verifications side by side

    class KernelRefineEnv(vf.Env[KernelRefineConfig]):
        kernel_env: KernelEnv | None = None  # built on first use from the config; tests may set it

        def environment(self) -> KernelEnv:
            if self.kernel_env is None:
                c = self.config
                verifier = (
                    Verifier.http(c.verify_url, token=c.verify_token) if c.verify_url else Verifier.pool(jobs=c.jobs)
                )
                self.kernel_env = KernelEnv(c.backend, c.max_turns, c.reward, verifier, alpha=c.alpha, beta=c.beta)
            return self.kernel_env

        async def run(self, task, agents) -> None:
            env = self.environment()
            kz_task = from_dict(Task, dict(task.data.kz_task))

            async def attempt(g: int) -> None:
                async with agents.agent.interaction(task) as interaction:
                    episode = await play_attempt(env, kz_task, interaction, f"{kz_task.name}#{g}")
                    interaction.trace.record_metrics(attempt_metrics(env, episode))

            await asyncio.gather(*(attempt(g) for g in range(self.config.group_size)))

        async def finalize(self, task, episode) -> None:
            traces = [t for t in episode.traces if t.agent.name == "agent"]
            missing = [t.id for t in traces if any(t.metrics.get(m) is None for m in METRICS[:2])]
            if missing:
                raise ValueError(f"trace(s) {missing} carry no kernel metrics; were they made by KernelRefineEnv.run?")
            c = self.config
            rewards = group_from_metrics([t.metrics for t in traces], c.reward, c.alpha, c.beta)
            for trace, r in zip(traces, rewards):
                trace.record_reward("kernel_reward", r)

    return SimpleNamespace(
        TaskData=KernelTaskData,
        Task=KernelTask,
        TasksetConfig=KernelTasksetConfig,
        Taskset=KernelTaskset,
        EnvConfig=KernelRefineConfig,
        Env=KernelRefineEnv,
    )


def __getattr__(name: str) -> Any:
    """`KernelTaskset`, `KernelRefineEnv` and their configs, built on first access (verifiers imported then)."""
    names = {
        "KernelTaskset": "Taskset",
        "KernelTasksetConfig": "TasksetConfig",
        "KernelRefineEnv": "Env",
        "KernelRefineConfig": "EnvConfig",
        "KernelTask": "Task",
    }
    if name in names:
        return getattr(verifiers_classes(), names[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
