"""Evaluation metrics: pass@k, fast_p, fast_p@k, geometric-mean speedup, and a run summary.

Pure functions over numbers and records (numpy only, no torch), so eval, rewards and reports share
one definition. They follow KernelBench's definitions:

- pass@k: the unbiased estimator of Chen et al. 2021, averaged over tasks; a sample counts when its
  status is `correct` (`compiled`, a CUDA source that only compiled on a machine without a GPU, does not).
- fast_p: KernelBench's number, over each task's FIRST sample: the share of tasks whose first sample is
  correct with speedup > p (strict `>`; the denominator is every task). fast_0 is first-sample correctness.
- fast_p@k: pass@k where a sample counts when it is correct AND its speedup is > p (KernelBench has none).
- fast_p_lower: as fast_p, but on the lower bound of each first sample's 95% speedup interval (`Verdict.speedup_ci`,
  eager baseline): the share of tasks that are faster than p beyond the timing noise. fast_p stays on the point
  estimate, as KernelBench reports it.
- geometric-mean speedup over correct samples with a timing; incorrect samples are left out, not penalised.
- task_mean_ci / paired_gain: a mean over tasks (each task's pass@1) with a percentile bootstrap interval, tasks as
  the unit, and the paired change between two evaluations of the same tasks (each task's difference is the unit).
- skipped samples: a verdict whose status is in `types.SKIPPED_STATUSES` (`infra_error`, `task_broken`) is not the
  candidate's, so every metric above leaves the sample out: a task's n is its samples with a real verdict, its
  first sample the first of those, and a task with none is not counted. Each group reports them apart, per status
  (`skipped`).

Speed metrics are None (shown "n/a"), never 0, when a run has no timings (a CPU run).

    from kernelzero.metrics import summarise
    summary = summarise(samples, verdict_records, policy="kernelbench")   # JSON-ready: metrics.json
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from kernelzero.types import POLICIES, SKIPPED_STATUSES, STATUSES

SPEED_BASELINES = ("eager", "compile")  # what a speedup is measured against: Verdict.speedup_<baseline>
DEFAULT_KS = (1, 5, 10)
DEFAULT_PS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)  # KernelBench's reported thresholds


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k from n samples of which c are correct; None when k > n (not estimated).

    >>> pass_at_k(10, 3, 1)
    0.3
    >>> round(pass_at_k(10, 3, 5), 6)  # 1 - C(7,5)/C(10,5) = 1 - 21/252
    0.916667
    >>> pass_at_k(10, 0, 5), pass_at_k(10, 10, 5), pass_at_k(4, 2, 5)
    (0.0, 1.0, None)
    """
    if k < 1 or n < 0 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs k >= 1 and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if k > n:
        return None
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    # Chen et al. 2021, "Evaluating Large Language Models Trained on Code" (arXiv:2107.03374), eq. 1
    # and Fig. 3: pass@k = 1 - C(n-c, k) / C(n, k). The ratio of binomials equals
    # prod_{i=n-c+1..n} (1 - k/i), which never forms the huge binomials (their numpy code; the same
    # form as human-eval and KernelBench's eval_from_generations.py). Rounded to 12 digits so that
    # 3/10 reads 0.3 in metrics.json, not 0.30000000000000004.
    return round(1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1))), 12)


def fast_p_at_k(n: int, c_p: int, k: int) -> float | None:
    """fast_p@k: pass@k where c_p counts the samples that are correct AND have speedup > p.

    >>> fast_p_at_k(10, 1, 1), fast_p_at_k(10, 1, 20)
    (0.1, None)
    """
    return pass_at_k(n, c_p, k)


def is_fast(correct: bool, speedup: float | None, p: float) -> bool:
    """Correct and strictly faster than p times the baseline (a missing speedup is not fast).

    >>> is_fast(True, 1.0, 1.0), is_fast(True, 1.01, 1.0), is_fast(False, 3.0, 1.0), is_fast(True, None, 0)
    (False, True, False, False)
    """
    return bool(correct) and speedup is not None and speedup > p


def fast_p(first_sample_results: Iterable[tuple[bool, float | None]], p: float) -> float | None:
    """KernelBench's fast_p: share of tasks whose first sample is correct with speedup > p (strict).

    `first_sample_results` holds one `(correct, speedup)` per task; None when there are no tasks.

    >>> first = [(True, 1.2), (True, 1.0), (False, None), (True, 0.5)]
    >>> fast_p(first, 1.0), fast_p(first, 0.0)  # fast_0 is first-sample correctness
    (0.25, 0.75)
    """
    results = list(first_sample_results)
    if not results:
        return None
    return sum(is_fast(correct, speedup, p) for correct, speedup in results) / len(results)


def geomean_speedup(speedups: Iterable[float | None]) -> float | None:
    """Geometric mean of the given speedups (None entries skipped); None when there are none.

    >>> geomean_speedup([2.0, 8.0, None]), geomean_speedup([0.5, 2.0]), geomean_speedup([])
    (4.0, 1.0, None)
    """
    values = [float(s) for s in speedups if s is not None]
    if not values:
        return None
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"speedups must be positive and finite, got {values}")
    return round(float(np.exp(np.mean(np.log(values)))), 12)


BOOTSTRAP_DRAWS = 10_000


def task_mean_ci(
    values: Sequence[float], level: float = 0.95, draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float, float] | None:
    """(mean, low, high): the mean of per-task values and its percentile bootstrap interval at `level`, tasks resampled
    with replacement (a fixed seed: the same values give the same interval); None for no values.

    >>> task_mean_ci([0.5, 0.5, 0.5])
    (0.5, 0.5, 0.5)
    >>> mean, low, high = task_mean_ci([0.0, 1.0] * 32); round(mean, 3), low < 0.4, high > 0.6
    (0.5, True, True)
    """
    if not 0 < level < 1 or draws < 1:
        raise ValueError(f"level must lie in (0, 1) and draws be at least 1, got {level}, {draws}")
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    if not np.all(np.isfinite(x)):
        raise ValueError("per-task values must be finite")
    means = x[np.random.default_rng(seed).integers(0, x.size, (draws, x.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean()), float(min(low, x.mean())), float(max(high, x.mean()))


def rate_by_task(outcomes: Iterable[tuple[str, int]]) -> dict[str, float]:
    """Each task's success share over its (task, 0 or 1) outcomes, tasks in first-seen order.

    >>> rate_by_task([("a", 1), ("b", 0), ("a", 0)])
    {'a': 0.5, 'b': 0.0}
    """
    counts: dict[str, list[int]] = defaultdict(list)
    for task, ok in outcomes:
        counts[task].append(ok)
    return {task: sum(c) / len(c) for task, c in counts.items()}


def paired_gain(before: dict[str, float], after: dict[str, float], level: float = 0.95) -> dict[str, Any] | None:
    """The change from `before` to `after` (per-task values, e.g. pass@1, keyed by task) over the tasks both hold, with
    a bootstrap interval over those tasks' differences (paired: a task's own difficulty cancels); None when they share
    no task.

    >>> paired_gain({"a": 0.0, "b": 0.25}, {"a": 0.5, "b": 0.75, "c": 1.0})
    {'tasks': 2, 'before': 0.125, 'after': 0.625, 'gain': 0.5, 'ci': [0.5, 0.5], 'level': 0.95}
    """
    common = sorted(set(before) & set(after))
    if not common:
        return None
    found = task_mean_ci([after[t] - before[t] for t in common], level)
    assert found is not None
    gain, low, high = found
    return {
        "tasks": len(common),
        "before": float(np.mean([before[t] for t in common])),
        "after": float(np.mean([after[t] for t in common])),
        "gain": gain,
        "ci": [low, high],
        "level": level,
    }


class _Row(NamedTuple):
    """One verified sample, reduced to what the metrics read."""

    task: str
    idx: int
    level: int | None
    status: str  # the policy's status when one is chosen, else the verdict's
    speedups: dict[str, float | None]  # per baseline
    device: str
    tokens: int | None
    ci_low: float | None = None  # lower bound of the speedup's 95% interval (vs eager), when the verdict has one

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def skipped(self) -> bool:
        """Not the candidate's verdict (`types.SKIPPED_STATUSES`): left out of every metric, counted apart."""
        return self.status in SKIPPED_STATUSES


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a record given as a dataclass (Verdict, Sample) or as its `to_dict` dict."""
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def _rows(samples: Iterable[Any], verdict_records: Iterable[dict], policy: str | None) -> tuple[list[_Row], int]:
    """Join verdicts to samples on (task, sample_idx); the last verdict of a pair wins (resumed runs)."""
    by_key = {(_get(s, "task"), _get(s, "sample_idx")): s for s in samples}
    rows: dict[tuple[str, int], _Row] = {}
    for record in verdict_records:
        verdict, key = record["verdict"], (record["task"], record["sample_idx"])
        sample = by_key.get(key)
        status = _get(verdict, "status")
        if policy is not None and status not in SKIPPED_STATUSES:  # the record's policies, the verdict's, its status
            status = (record.get("policies") or _get(verdict, "policy_status") or {}).get(policy, status)
        level = record.get("level")
        if level is None and sample is not None:
            level = _get(sample, "level")
        speedups = {b: _get(verdict, f"speedup_{b}") for b in SPEED_BASELINES}
        tokens = _get(sample, "output_tokens") if sample is not None else None
        ci = _get(verdict, "speedup_ci")
        ci_low = ci[0] if ci else None
        rows[key] = _Row(key[0], key[1], level, status, speedups, _get(verdict, "device", "cpu"), tokens, ci_low)
    return list(rows.values()), len(set(by_key) - set(rows))


def correct_speedups(
    samples: Iterable[Any], verdict_records: Iterable[dict], baseline: str = "eager", policy: str | None = None
) -> list[float]:
    """The speedups (vs `baseline`) of the correct samples that have one, e.g. for a histogram."""
    rows, _ = _rows(samples, verdict_records, policy)
    return [r.speedups[baseline] for r in rows if r.correct and r.speedups[baseline] is not None]


def _timed(rows: Sequence[_Row], baseline: str) -> bool:
    """Whether speed metrics vs `baseline` exist: some sample has a speedup, or nothing was correct on a GPU."""
    if any(r.speedups[baseline] is not None for r in rows):
        return True
    return not any(r.correct for r in rows) and any(r.device != "cpu" for r in rows)


def p_key(p: float) -> str:
    """The JSON key of a threshold p: 0 -> "0", 1.0 -> "1", 1.5 -> "1.5"."""
    return f"{p:g}"


def _group(
    rows: Sequence[_Row], ks: Sequence[int], ps: Sequence[float], speed: str, timed: dict[str, bool]
) -> dict[str, Any]:
    """Metrics of one group of rows (a level, or the whole run), each task with its own n (skipped rows apart)."""
    skipped = Counter(r.status for r in rows if r.skipped)
    rows = [r for r in rows if not r.skipped]
    by_task: dict[str, list[_Row]] = defaultdict(list)
    for r in rows:
        by_task[r.task].append(r)
    tasks = list(by_task.values())
    ns = [len(t) for t in tasks]
    estimated = [k for k in ks if tasks and min(ns) >= k]

    def mean_at_k(count: Any, k: int) -> float:
        return round(float(np.mean([pass_at_k(len(t), sum(count(r) for r in t), k) for t in tasks])), 12)

    pass_k = {str(k): mean_at_k(lambda r: r.correct, k) for k in estimated}
    fast_k = fast_first = fast_lower = None
    if timed[speed]:
        fast_k = {
            p_key(p): {str(k): mean_at_k(lambda r, p=p: is_fast(r.correct, r.speedups[speed], p), k) for k in estimated}
            for p in ps
        }
        first = [min(t, key=lambda r: r.idx) for t in tasks]
        fast_first = {p_key(p): fast_p([(r.correct, r.speedups[speed]) for r in first], p) for p in ps}
        if speed == "eager":  # the share whose speedup's lower 95% bound exceeds p (a speedup that reproduces)
            fast_lower = {p_key(p): fast_p([(r.correct, r.ci_low) for r in first], p) for p in ps}
    geomean = {
        b: geomean_speedup(r.speedups[b] for r in rows if r.correct) if timed[b] else None for b in SPEED_BASELINES
    }
    tokens = [r.tokens for r in rows if r.tokens is not None]
    counts = Counter(r.status for r in rows)
    order = [s for s in STATUSES if s in counts] + sorted(set(counts) - set(STATUSES))
    return {
        "tasks": len(tasks),
        "samples": len(rows),
        "samples_per_task": {"min": min(ns), "max": max(ns)} if ns else None,
        "correct": counts["correct"],
        "correct_untimed": sum(r.correct and r.speedups[speed] is None for r in rows) if timed[speed] else None,
        "pass@k": pass_k,
        "fast_p@k": fast_k,
        "fast_p": fast_first,
        "fast_p_lower": fast_lower,
        "not_estimated": [k for k in ks if k not in estimated],
        "geomean_speedup": geomean,
        "avg_output_tokens": round(float(np.mean(tokens)), 3) if tokens else None,
        "statuses": {s: counts[s] for s in order},
        "skipped": {s: skipped[s] for s in SKIPPED_STATUSES},
    }


def level_key(level: int | None) -> str:
    """The JSON key of a level: 1 -> "1", None -> "unknown"."""
    return "unknown" if level is None else str(level)


def summarise(
    samples: Iterable[Any],
    verdict_records: Iterable[dict],
    ks: Sequence[int] = DEFAULT_KS,
    ps: Sequence[float] = DEFAULT_PS,
    speed: str = "eager",
    policy: str | None = None,
) -> dict[str, Any]:
    """Metrics of a run, overall and per level, as a JSON-ready dict (eval writes it as metrics.json).

    `samples`: `Sample`s or their dicts (for output tokens and levels). `verdict_records`: the lines of
    verdicts.jsonl, `{"task", "sample_idx", "level", "verdict": Verdict or dict, "policies": {...}}`.
    `speed` picks the baseline of fast_p and fast_p@k; geometric means are given against both.
    `policy` ("kernelbench" or "strict") reads each record's `policies[policy]` (or the verdict's
    `policy_status[policy]`) as its status, the verdict's status where the key is absent. pass@k and
    fast_p@k leave out any k above some task's sample count (listed in "not_estimated"); speed metrics
    are None when the run has no timings. Skipped samples (`infra_error`, `task_broken`) are left out of
    everything and counted per status under "skipped".

    >>> from kernelzero.types import Verdict
    >>> def rec(i, status, s=None):
    ...     v = Verdict(status, "t", "h", "c", "triton", "default", "H200", "done", speedup_eager=s)
    ...     return {"task": "t", "sample_idx": i, "level": 1, "verdict": v}
    >>> m = summarise([], [rec(0, "correct", 1.5), rec(1, "mismatch"), rec(2, "correct", 0.6)], ks=(1, 2, 5))
    >>> m["overall"]["pass@k"], m["overall"]["not_estimated"], m["levels"]["1"]["fast_p"]["1"]
    ({'1': 0.666666666667, '2': 1.0}, [5], 1.0)
    >>> m["overall"]["fast_p@k"]["1"], m["overall"]["geomean_speedup"]
    ({'1': 0.333333333333, '2': 0.666666666667}, {'eager': 0.948683298051, 'compile': None})
    """
    if speed not in SPEED_BASELINES:
        raise ValueError(f"speed must be one of {SPEED_BASELINES}, got {speed!r}")
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"policy must be None or one of {POLICIES}, got {policy!r}")
    rows, unverified = _rows(samples, verdict_records, policy)
    timed = {b: _timed([r for r in rows if not r.skipped], b) for b in SPEED_BASELINES}
    levels: dict[int | None, list[_Row]] = defaultdict(list)
    for r in rows:
        levels[r.level].append(r)
    ordered = sorted(levels, key=lambda lv: (lv is None, lv or 0))
    return {
        "speed": speed,
        "policy": policy,
        "ks": list(ks),
        "ps": [float(p) for p in ps],
        "timed": timed,
        "unverified_samples": unverified,
        "overall": _group(rows, ks, ps, speed, timed),
        "levels": {level_key(lv): _group(levels[lv], ks, ps, speed, timed) for lv in ordered},
    }
