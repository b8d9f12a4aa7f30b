"""Choosing the kernel: the search's correct candidates, re-verified more strictly and at other sizes.

    cands = candidates(verdict_records, sample_records)          # strict-correct, one per distinct source
    chosen, results = choose(rank(cands), checks_for, run_checks, finalists=3)

Candidates are the turns whose verdict is `correct` under the `strict` policy, one per distinct source (the
verdict's candidate hash), numbered in the order the search found them. They are ranked by the speedup over eager
the search measured (faster first; an untimed candidate after every timed one), then by that order.

Finalists, `finalists` at a time down the ranking, are re-verified: at the task's own sizes with more correctness
trials and timing against eager and torch.compile, and at each size variant (optimize/sizes.py) for correctness.
A finalist passes when every one of these verdicts is `correct` under `strict`. The chosen kernel is the passing
finalist with the largest re-verified speedup over eager; among equals, and whenever nothing was timed, the one
found first. On CPU there are no timings, so the chosen kernel is the earliest-found candidate that passes at
every size: a kernel correct only at the original size is never chosen, whatever its speed. When no finalist of a
round passes, the next `finalists` candidates are tried, until one passes or none is left. When the search timed
nothing (CPU), finalists go one at a time: the first that passes is the answer, so the rest need no re-verification.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelzero.rewards import is_correct
from kernelzero.types import Task, Verdict, verdict_from_dict
from kernelzero.verify import VerifyOptions

ORIGINAL = "original"  # the variant name of the task's own sizes


@dataclass(frozen=True)
class Candidate:
    """A distinct kernel the search found correct."""

    hash: str  # the verdict's candidate_hash (of the source as run)
    code: str  # the source (the code extracted from the completion)
    episode: int  # the episode (sample_idx) it came from
    turn: int  # the turn of that episode, 1-based
    order: int  # 0 for the first correct kernel the search found, then 1, 2, ...
    speedup: float | None  # speedup over eager measured in the search; None when not timed (CPU)


@dataclass(frozen=True)
class Check:
    """One re-verification: a candidate at one size variant, with the options of that variant."""

    candidate: Candidate
    variant: str  # ORIGINAL, "half" or "double"
    task: Task
    options: VerifyOptions

    @property
    def key(self) -> tuple[str, str]:
        return (self.candidate.hash, self.variant)


def candidates(verdicts: Iterable[dict[str, Any]], samples: Iterable[dict[str, Any]]) -> list[Candidate]:
    """The strict-correct turns of the search, one per distinct source, in the order verdicts.jsonl has them."""
    code = {(s["sample_idx"], s["turn"]): s["code"] for s in samples}
    found: dict[str, Candidate] = {}
    for rec in verdicts:
        verdict = rec["verdict"]
        if not is_correct(verdict, "strict") or verdict["candidate_hash"] in found:
            continue
        key = (rec["sample_idx"], rec["turn"])
        if key not in code:
            continue
        found[verdict["candidate_hash"]] = Candidate(
            verdict["candidate_hash"], code[key], key[0], key[1], len(found), verdict.get("speedup_eager")
        )
    return list(found.values())


def rank(cands: Sequence[Candidate]) -> list[Candidate]:
    """Faster first by the search's speedup (untimed last), then found earlier first.

    >>> c = lambda h, order, s: Candidate(h, "", 0, 1, order, s)
    >>> [x.hash for x in rank([c("a", 0, None), c("b", 1, 1.2), c("c", 2, 2.0), c("d", 3, None)])]
    ['c', 'b', 'a', 'd']
    """
    return sorted(cands, key=lambda c: (c.speedup is None, -(c.speedup or 0.0), c.order))


def passed(verdicts: dict[str, Verdict], variants: Sequence[str]) -> bool:
    """Every variant has a verdict and each is correct under `strict`."""
    return all(v in verdicts and is_correct(verdicts[v], "strict") for v in variants)


def pick(
    finalists: Sequence[Candidate], results: dict[str, dict[str, Verdict]], variants: Sequence[str]
) -> Candidate | None:
    """The passing finalist with the largest re-verified speedup over eager at ORIGINAL; ties and untimed: the
    earliest found. None when none passes.

    >>> from kernelzero.types import Verdict
    >>> ok = lambda s=None: Verdict("correct", "t", "h", "c", "triton", "default", "H200", "done", speedup_eager=s)
    >>> bad = Verdict("mismatch", "t", "h", "c", "triton", "default", "H200", "done")
    >>> a, b, c = (Candidate(h, "", 0, 1, i, None) for i, h in enumerate("abc"))
    >>> results = {"a": {"original": ok(1.5), "half": ok()}, "b": {"original": ok(3.0), "half": bad},
    ...            "c": {"original": ok(2.0), "half": ok()}}
    >>> pick([a, b, c], results, ["original", "half"]).hash   # b is faster but fails at half the size
    'c'
    """
    passing = [c for c in finalists if passed(results.get(c.hash, {}), variants)]
    if not passing:
        return None

    def key(c: Candidate) -> tuple:
        speed = results[c.hash][ORIGINAL].speedup_eager
        return (speed is not None, speed or 0.0, -c.order)

    return max(passing, key=key)


def choose(
    ranked: Sequence[Candidate],
    checks_for: Callable[[Candidate], list[Check]],
    run_checks: Callable[[list[Check]], dict[tuple[str, str], Verdict]],
    finalists: int = 3,
) -> tuple[Candidate | None, list[Candidate], dict[str, dict[str, Verdict]]]:
    """(chosen, the finalists re-verified, their verdicts by hash and variant): finalists `finalists` at a time
    down the ranking until one passes (see the module docstring)."""
    if finalists < 1:
        raise ValueError(f"finalists must be at least 1, got {finalists}")
    if all(c.speedup is None for c in ranked):  # nothing timed: the first that passes wins, so try one at a time
        finalists = 1
    tried: list[Candidate] = []
    results: dict[str, dict[str, Verdict]] = {}
    variants: list[str] = []
    for start in range(0, len(ranked), finalists):
        batch = list(ranked[start : start + finalists])
        checks = [check for c in batch for check in checks_for(c)]
        variants = list(dict.fromkeys(check.variant for check in checks))
        for (digest, variant), verdict in run_checks(checks).items():
            results.setdefault(digest, {})[variant] = verdict
        tried += batch
        chosen = pick(batch, results, variants)
        if chosen is not None:
            return chosen, tried, results
    return None, tried, results


def stored_verdict(record: dict[str, Any]) -> Verdict:
    """The Verdict of one reverify.jsonl line."""
    return verdict_from_dict(record["verdict"])
