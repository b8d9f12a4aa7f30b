"""The Proposer's reward function for TRL's GRPOTrainer: admission, the frozen Coder's N tries, Frontier Reward.

    reward = ProposerReward(cfg, round_no=1, phase_dir=run / "round-1" / "proposer", coder_path=..., store=...)
    GRPOTrainer(..., reward_funcs=[reward])   # TRL calls reward(prompts=, completions=, apis=, origin=, ...)

For each completion of a step (TRL's contract: one float per completion, dataset columns as keywords):
1. its code goes through admission (proposer/admit.py: syntax, dedup against the benchmark and every earlier
   proposal of the run, then the runnable and numerical checks in the verifier's sandboxed reference process);
   a rejected proposal's reward is `rho`;
2. each admitted module is solved N times by the frozen Coder (generation through a Coder backend: `hf:` on
   the Coder checkpoint, or a served model), every kernel verified like the Coder phase verifies
   (train/reward.py: the local pool, Ray or the HTTP service); p is the share correct under the strict policy;
3. its reward is `rewards.frontier_reward(p)` (optionally lowered for near-duplicates within the step). p leaves
   out solves whose verdict is not the Coder's (`infra_error`, `task_broken`); a module whose every solve was
   skipped gets no reward (None: TRL gives it no advantage) and p None.
Nothing here fakes a decision or a verdict: both come from the real admission and the real verifier.

Every proposal of the run is appended to the run-wide admission log and suite (`proposer/admissions.jsonl`,
`proposer/admitted.jsonl`) and to its phase's `proposals.jsonl` (decision, p, reward) and `solutions.jsonl`
(the Coder's samples and verdict statuses). Ids are `r<round>s<step>i<index>`; a resumed phase first drops the
lines of steps after its checkpoint (`truncate_step_files`), so a redone step leaves no trace of its first try.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelzero.coder import extract_code
from kernelzero.coder.backends.base import GenRequest, SamplingParams
from kernelzero.coder.prompts import build_messages as coder_messages
from kernelzero.proposer.admit import AdmitOptions, admit
from kernelzero.proposer.prompts import PROMPT_VERSION
from kernelzero.rewards import frontier_reward, is_correct, penalise_near_duplicates, success_rate
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import load_suite, resize
from kernelzero.train.coevolve_config import CoevolveConfig
from kernelzero.train.report import read_jsonl
from kernelzero.train.reward import CoderReward, completion_text
from kernelzero.types import Task, Verdict, is_skipped

DEDUP_REASONS = ("duplicate", "benchmark_duplicate")


def admit_options(cfg: CoevolveConfig) -> AdmitOptions:
    a = cfg.proposer.admission
    return AdmitOptions(
        device=a.device,
        jobs=a.jobs,
        timeout_s=a.timeout_s,
        mem_gb=a.mem_gb,
        scale=a.scale,
        max_extra=a.max_extra,
        window_us=a.window_us,
        profile="default",
        benchmarks=(*([a.benchmark_index] if a.benchmark_dedup and a.benchmark_index else []), *(a.benchmarks or ())),
        default_benchmark=False,  # the index is the config's, never looked up by a default path
    )


def dedup_note(cfg: CoevolveConfig) -> str:
    """What every proposal record says about benchmark de-duplication: the index, or that it was off."""
    a = cfg.proposer.admission
    return (a.benchmark_index or "") if a.benchmark_dedup else "off (proposer.admission.benchmark_dedup: false)"


def proposal_id(round_no: int, step: int, index: int) -> str:
    return f"r{round_no}s{step:04d}i{index:03d}"


def id_step(pid: str) -> tuple[int, int]:
    """(round, step) of a proposal id."""
    head = pid.split("i", 1)[0]
    r, s = head[1:].split("s")
    return int(r), int(s)


def _filter_lines(path: Path, keep: Callable[[dict[str, Any]], bool]) -> None:
    if not path.exists():
        return
    rows = read_jsonl(path)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if keep(r)))


def truncate_step_files(root: Path, phase_dir: Path, round_no: int, done: int) -> None:
    """Drop every record of this round's steps after `done` (a resumed phase redoes them)."""

    def keep_id(pid: str) -> bool:
        r, s = id_step(pid)
        return r != round_no or s <= done

    _filter_lines(root / "proposer" / "admissions.jsonl", lambda r: keep_id(r["id"]))
    _filter_lines(root / "proposer" / "admitted.jsonl", lambda r: keep_id(r["provenance"]["proposal_id"]))
    for name in ("proposals.jsonl", "solutions.jsonl"):
        _filter_lines(phase_dir / name, lambda r: r["step"] <= done)


def step_stats(records: list[dict[str, Any]], group_size: int = 0) -> dict[str, Any]:
    """Per-step statistics of the Proposer: admission, success rates, reward, diversity, and with `group_size` (TRL's
    consecutive completions of one prompt) the groups whose rewards differ (a reward of None left out)."""
    n = len(records)
    groups = [records[i : i + group_size] for i in range(0, n, group_size)] if group_size > 0 else []
    values = [[r["reward"] for r in g if r["reward"] is not None] for g in groups]
    admitted = [r for r in records if r["admitted"]]
    rewarded = [r["reward"] for r in records if r["reward"] is not None]  # None: every solve was skipped
    known = [r["p"] for r in admitted if r["p"] is not None]
    reasons = Counter(r["reason"] for r in records if not r["admitted"])
    hist = Counter(f"{r['p']:.2f}" for r in admitted if r["p"] is not None)
    return {
        "proposals": n,
        "admitted": len(admitted),
        "admission_rate": len(admitted) / n if n else 0.0,
        "reasons": dict(sorted(reasons.items())),
        "success_hist": dict(sorted(hist.items())),
        "mean_success": sum(known) / len(known) if known else None,
        "reward_mean": sum(rewarded) / len(rewarded) if rewarded else 0.0,
        "unrewarded": n - len(rewarded),
        "distinct_api_sets": len({tuple(r["apis"]) for r in admitted}),
        "near_duplicate_share": sum(r["reason"] in DEDUP_REASONS for r in records) / n if n else 0.0,
        **({"groups_with_signal": sum(1 for v in values if v and max(v) > min(v))} if group_size > 0 else {}),
    }


def solved_reward(verdicts: Sequence[Verdict], form: str, rho: float) -> tuple[float | None, float | None]:
    """(p, Frontier Reward) of an admitted module from the Coder's verdicts on it: p over the solves whose verdict
    is the Coder's (`infra_error`, `task_broken` left out, N = their number for the unbiased form); (None, None)
    when every solve was skipped."""
    p = success_rate(verdicts)
    if p is None:
        return None, None
    n = max(2, sum(not is_skipped(v) for v in verdicts))  # one judged solve: p (1 - p) = 0 whatever N is
    return p, frontier_reward(p, form, n, rho)


class CoderSolver:
    """The frozen Coder: N samples per task from a generation backend, verified through CoderReward.verify."""

    def __init__(self, cfg: CoevolveConfig, coder_path: str, store: VerdictStore | None):
        self.cfg = cfg
        self.coder_path = coder_path
        self.backend: Any = None  # loaded on the first admitted module
        self.checker = CoderReward({}, cfg.coder.reward, cfg.coder.verifier, 2, cfg.coder.backend, store)

    def _load(self) -> Any:
        from kernelzero.coder.backends import load_backend

        s = self.cfg.proposer.solve
        if s.model is not None:
            return load_backend(s.model)
        return load_backend(f"hf:{self.coder_path}", device=s.device, batch_size=s.batch_size)

    def solve(self, tasks: Sequence[Task], seed: int) -> tuple[dict[str, list[tuple[str, Verdict]]], float, float]:
        """task name -> [(completion, verdict)] of N samples each; (results, generation s, verification s)."""
        if not tasks:
            return {}, 0.0, 0.0
        s = self.cfg.proposer.solve
        start = time.monotonic()
        if self.backend is None:
            self.backend = self._load()
        requests = [GenRequest(t.name, coder_messages(t, self.cfg.coder.backend)) for t in tasks]
        params = SamplingParams(n=s.samples, temperature=s.temperature, max_tokens=s.max_tokens, seed=seed)
        gens = self.backend.generate(requests, params)
        generated = time.monotonic()
        self.checker.tasks.update({t.name: t for t in tasks})
        names, texts = [], []
        for t in tasks:
            for g in gens.get(t.name, []):
                names.append(t.name)
                texts.append(g.text if g.ok else "")
        verdicts = self.checker.verify(names, texts, timed=False)  # p needs correctness only
        out: dict[str, list[tuple[str, Verdict]]] = {t.name: [] for t in tasks}
        for name, text, verdict in zip(names, texts, verdicts):
            out[name].append((text, verdict))
        return out, generated - start, time.monotonic() - generated


class ProposerReward:
    """A TRL reward function (callable object) computing the Frontier Reward of each proposal."""

    __name__ = "frontier"

    def __init__(
        self,
        cfg: CoevolveConfig,
        round_no: int,
        root: Path,
        phase_dir: Path,
        solver: CoderSolver,
        model_name: str,
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.cfg, self.round_no, self.root, self.phase_dir = cfg, round_no, root, phase_dir
        self.solver, self.model_name, self.on_step = solver, model_name, on_step
        self.options = admit_options(cfg)
        self.dedup = dedup_note(cfg)
        self.suite_path = root / "proposer" / "admitted.jsonl"
        self.log_path = root / "proposer" / "admissions.jsonl"
        self.collect_step = 0  # the step number when called outside TRL (a frozen Proposer)

    def _tasks(self, names: list[str]) -> list[Task]:
        if not names:
            return []
        by_name = {t.name: t for t in load_suite(self.suite_path).tasks}
        return [resize(by_name[n], scale=self.options.scale) for n in names]

    def _rewards(self, proposals: list[dict], decisions: dict, solved: dict) -> list[tuple[float | None, float | None]]:
        """(p, reward) per proposal: rho when not admitted; None, None when every solve was skipped."""
        p_cfg = self.cfg.proposer.reward
        out: list[tuple[float | None, float | None]] = []
        for prop in proposals:
            d = decisions[prop["id"]]
            if not d.admitted:
                out.append((None, frontier_reward(None, p_cfg.form, self.cfg.proposer.solve.samples, p_cfg.rho)))
                continue
            out.append(solved_reward([v for _, v in solved[d.task]], p_cfg.form, p_cfg.rho))
        if p_cfg.duplicate_penalty > 0:
            keys = [decisions[prop["id"]].near_key for prop in proposals]
            shaped = penalise_near_duplicates([r for _, r in out], keys, p_cfg.duplicate_penalty)
            out = [(p, r) for (p, _), r in zip(out, shaped)]
        return out

    def __call__(self, prompts: list, completions: list, apis: list, origin: list, **kwargs: Any) -> list[float | None]:
        called = time.time()
        state = kwargs.get("trainer_state")
        step = state.global_step + 1 if state is not None else self.collect_step
        texts = [completion_text(c) for c in completions]
        proposals = [
            {
                "id": proposal_id(self.round_no, step, i),
                "apis": list(apis[i]),
                "code": extract_code(text),
                "completion": text,
                "model": self.model_name,
                "prompt_version": PROMPT_VERSION,
                "origin": origin[i],
                "corpus": {},
            }
            for i, text in enumerate(texts)
        ]
        decisions: dict[str, Any] = {}
        admit(
            proposals, self.options, self.suite_path, self.log_path, on_decision=lambda d: decisions.update({d.id: d})
        )
        admitted_at = time.time()
        names = [decisions[p["id"]].task for p in proposals if decisions[p["id"]].admitted]
        solved, gen_s, verify_s = self.solver.solve(self._tasks(names), seed=self.cfg.coder.seed + 1000 * step)
        scored = self._rewards(proposals, decisions, solved)
        records = []
        for prop, (p, reward) in zip(proposals, scored):
            d = decisions[prop["id"]]
            records.append(
                {
                    "id": prop["id"],
                    "round": self.round_no,
                    "step": step,
                    "apis": prop["apis"],
                    "origin": prop["origin"],
                    "admitted": d.admitted,
                    "reason": d.reason,
                    "message": d.message[:300],
                    "task": d.task,
                    "p": p,
                    "reward": reward,
                    "benchmark_dedup": self.dedup,
                    "code": prop["code"],
                }
            )
        self._write(step, records, solved)
        if self.on_step is not None:
            stats = step_stats(records, self.cfg.proposer.grpo.group_size)
            stats["try_statuses"] = dict(
                sorted(Counter(v.status for tries in solved.values() for _, v in tries).items())
            )
            stats["time_admit_s"] = round(admitted_at - called, 3)
            stats["time_solve_generate_s"] = round(gen_s, 3)
            stats["time_solve_verify_s"] = round(verify_s, 3)
            self.on_step({"stats": stats, "reward_called_at": called, "verify_s": time.time() - called})
        return [r["reward"] for r in records]

    def _write(self, step: int, records: list[dict[str, Any]], solved: dict[str, list]) -> None:
        self.phase_dir.mkdir(parents=True, exist_ok=True)
        with open(self.phase_dir / "proposals.jsonl", "a") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in records))
        with open(self.phase_dir / "solutions.jsonl", "a") as fh:
            for task, tries in solved.items():
                for i, (text, v) in enumerate(tries):
                    row = {"step": step, "task": task, "sample": i, "status": v.policy_status.get("strict", v.status)}
                    row.update({"correct": is_correct(v, "strict"), "message": v.message[:200], "completion": text})
                    fh.write(json.dumps(row) + "\n")
