"""The run folder of episodes stepped turn by turn: its three logs, its request keys, and resuming from it.

    logs = TurnLogs(out)                               # samples.jsonl, verdicts.jsonl, episodes.jsonl
    ep = resume_episode(env, task, i, latest_states(logs).get((task.name, i)), logs)
    failed = generate_turn(generator, todo, turn, logs, params, backend="triton", model="replay:r.jsonl")
    stepped = step_turn(env, live, turn, logs)         # the (task, sample_idx) keys verified this turn

`kernelzero eval --turns T` (evaluation/multiturn.py) and `kernelzero optimize` (optimize/search.py) both run
episodes of the kernel environment and keep the same records, so one replay file scripts both and a rerun of
either continues where it stopped:
- `samples.jsonl`: a `Sample` dict plus "turn" (1-based) per (task, sample_idx, turn);
- `verdicts.jsonl`: `{"task", "sample_idx", "turn", "level", "verdict", "policies"}` per (task, sample_idx, turn);
- `episodes.jsonl`: `{"task", "sample_idx", "turn", "episode"}`, the episode's state after that turn.
All three are append-only, keyed by (task, sample_idx, turn), and safe to append to from several threads (a
backend may report generations from its own threads).

Generation keys: turn 1 asks under the task's name for all its episodes at once (they share the prompt; episode i
is the task's i-th completion); turn t >= 2 asks under `NAME#sample{i}#turn{t}` (`turn_key`), one request per
episode, since each has its own conversation.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelzero.coder.backends.base import Generation, GenRequest, SamplingParams
from kernelzero.coder.prompts import PROMPT_VERSIONS
from kernelzero.env.core import KernelEnv
from kernelzero.env.episode import FOLLOW_UP_VERSION, Episode
from kernelzero.extract import extract_code
from kernelzero.proposer.records import AppendLog
from kernelzero.tasks import task_hash
from kernelzero.types import Sample, Task, Verdict, to_dict

Key = tuple[str, int]  # (task name, sample_idx): one episode


def turn_key(task: str, sample: int, turn: int) -> str:
    """The generation request key of one turn of an episode: the task's name for turn 1 (its episodes share the
    prompt), `NAME#sample{i}#turn{t}` after (each episode has its own prompt)."""
    return task if turn == 1 else f"{task}#sample{sample}#turn{turn}"


def prompt_version(backend: str, turn: int) -> str:
    """What a turn's prompt was made with: the one-shot template, plus the environment's follow-up after turn 1."""
    return PROMPT_VERSIONS[backend] if turn == 1 else f"{PROMPT_VERSIONS[backend]}+{FOLLOW_UP_VERSION}"


def sample_record(task: Task, gen: Generation, backend: str, model: str, prompt_version: str) -> dict[str, Any]:
    """The samples.jsonl line of one generation (a `Sample` as a dict; a multi-turn log adds "turn")."""
    return to_dict(
        Sample(
            task=task.name,
            task_hash=task_hash(task),
            sample_idx=gen.sample_idx,
            level=task.level,
            backend=backend,
            model=model,
            prompt_version=prompt_version,
            completion=gen.text,
            code=extract_code(gen.text),
            output_tokens=gen.output_tokens,
            prompt_tokens=gen.prompt_tokens,
            finish_reason=gen.finish_reason,
            seconds=gen.seconds,
            seed=gen.seed,
        )
    )


def verdict_record(task: Task, sample_idx: int, turn: int, verdict: Verdict) -> dict[str, Any]:
    """One verdicts.jsonl line of an episode's turn."""
    return {
        "task": task.name,
        "sample_idx": sample_idx,
        "turn": turn,
        "level": task.level,
        "verdict": to_dict(verdict),
        "policies": verdict.policy_status,
    }


class _LockedLog(AppendLog):
    """An AppendLog whose appends may come from several threads."""

    def __init__(self, path: Path, key: Callable[[dict[str, Any]], Any]):
        super().__init__(path, key)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> bool:
        with self._lock:
            return super().append(record)


class TurnLogs:
    """The three append-only files of a run folder of episodes, keyed by (task, sample_idx, turn)."""

    def __init__(self, out: Path):
        key = lambda r: (r["task"], r["sample_idx"], r["turn"])  # noqa: E731
        self.samples = _LockedLog(Path(out) / "samples.jsonl", key)
        self.verdicts = _LockedLog(Path(out) / "verdicts.jsonl", key)
        self.episodes = _LockedLog(Path(out) / "episodes.jsonl", key)

    def samples_at(self, turn: int) -> dict[Key, dict[str, Any]]:
        """{(task, sample_idx): its sample record} of one turn."""
        return {(r["task"], r["sample_idx"]): r for r in self.samples.records() if r["turn"] == turn}


def latest_states(logs: TurnLogs) -> dict[Key, dict[str, Any]]:
    """{(task, sample_idx): the episode's state (an `Episode.to_dict`) after its latest logged turn}."""
    latest: dict[Key, dict[str, Any]] = {}
    for rec in logs.episodes.records():
        key = (rec["task"], rec["sample_idx"])
        if rec["turn"] >= latest.get(key, {"turn": 0})["turn"]:
            latest[key] = rec
    return {key: rec["episode"] for key, rec in latest.items()}


def resume_episode(
    env: KernelEnv, task: Task, sample_idx: int, state: dict[str, Any] | None, logs: TurnLogs
) -> Episode:
    """Episode `sample_idx` of `task` from its logged state, or a fresh one without a state.

    A turn the episode holds but verdicts.jsonl lacks (a run killed between the two writes) gets its verdict line
    here.
    """
    if state is None:
        return env.reset(task, episode_id=f"{task.name}#{sample_idx}")
    ep = Episode.from_dict(state)
    for turn, t in enumerate(ep.turns, 1):
        if t.verdict is not None:
            logs.verdicts.append(verdict_record(task, sample_idx, turn, t.verdict))
    return ep


def turn_requests(todo: Sequence[tuple[Key, Episode]], turn: int) -> dict[str, tuple[Task, int, GenRequest]]:
    """{key: (task, episode index or -1 for all, request)} of one turn: turn 1 one request per task for all its
    episodes, which share the prompt; later turns one request per episode."""
    if turn > 1:
        return {turn_key(n, i, turn): (ep.task, i, GenRequest(turn_key(n, i, turn), ep.prompt)) for (n, i), ep in todo}
    idxs: dict[str, list[int]] = defaultdict(list)
    first: dict[str, Episode] = {}
    for (name, i), ep in todo:
        idxs[name].append(i)
        first.setdefault(name, ep)
    return {name: (ep.task, -1, GenRequest(name, ep.prompt, tuple(idxs[name]))) for name, ep in first.items()}


def generate_turn(
    generator: Any,
    todo: Sequence[tuple[Key, Episode]],
    turn: int,
    logs: TurnLogs,
    params: SamplingParams,
    backend: str,
    model: str,
    advance: Callable[[int], Any] = lambda n: None,
) -> list[tuple[Task, Generation]]:
    """Ask `generator` (a coder backend) for turn `turn` of the episodes in `todo`, all in one call; store each
    completion in samples.jsonl and return the failed generations (not stored: a rerun asks again).

    `advance(n)` is called with the number of generations of each finished request (a progress bar)."""
    requests = turn_requests(todo, turn)
    version = prompt_version(backend, turn)
    failed: list[tuple[Task, Generation]] = []

    def on_done(request: GenRequest, gens: list[Generation]) -> None:
        task, episode, _ = requests[request.key]
        for g in gens:
            g = g if episode < 0 else replace(g, sample_idx=episode)
            if g.ok:
                logs.samples.append({**sample_record(task, g, backend, model, version), "turn": turn})
            else:
                failed.append((task, g))
        advance(len(gens))

    generator.generate([req for _, _, req in requests.values()], params, on_done=on_done)
    return failed


def step_turn(env: KernelEnv, live: Sequence[tuple[Key, Episode]], turn: int, logs: TurnLogs) -> list[Key]:
    """Verify turn `turn` of the live episodes whose sample is stored, in one batch (`KernelEnv.step_many`); log
    each episode's new state and verdict; return the keys of the episodes stepped."""
    stored = logs.samples_at(turn)
    ready = [(key, ep) for key, ep in live if key in stored]
    if not ready:
        return []
    texts = [stored[key]["completion"] for key, _ in ready]
    tokens = [stored[key].get("output_tokens") for key, _ in ready]
    results = env.step_many([ep for _, ep in ready], texts, output_tokens=tokens)
    for ((name, i), ep), res in zip(ready, results):
        logs.episodes.append({"task": name, "sample_idx": i, "turn": turn, "episode": ep.to_dict()})
        if res.verdict is not None:
            logs.verdicts.append(verdict_record(ep.task, i, turn, res.verdict))
    return [key for key, _ in ready]
