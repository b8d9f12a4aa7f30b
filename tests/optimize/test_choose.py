"""optimize/choose.py and optimize/search.py with stand-ins: the choice of the fastest kernel that passes at every
size, and the search's budget, waves, turns and resume.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/optimize/test_choose.py`
No kernel runs here: the environment gets a stand-in `Verifier` (a function from completions to Verdicts, the
interface `KernelEnv` documents) and the choice gets re-verification verdicts made up with GPU timings, the case a
CPU run cannot show. tests/optimize/test_optimize.py runs the real thing on CPU.
"""

from __future__ import annotations

import doctest
import json
import time

import pytest

from kernelzero.coder.backends import load_backend
from kernelzero.coder.backends.base import SamplingParams
from kernelzero.env import KernelEnv, Verifier
from kernelzero.env.runlog import TurnLogs
from kernelzero.optimize import choose as choosing
from kernelzero.optimize.choose import Candidate, Check, candidates, choose, rank
from kernelzero.optimize.search import SearchPlan, search
from kernelzero.types import Task, Verdict, to_dict

TASK = Task(name="gelu", source="import torch\nrows = 256\n", suite="optimize")


def _verdict(status: str, speedup: float | None = None, digest: str = "c") -> Verdict:
    return Verdict(
        status,
        "gelu",
        "h",
        digest,
        "triton",
        "default",
        "H200",
        "done",
        speedup_eager=speedup,
        policy_status={"strict": status, "kernelbench": status},
    )


def test_the_docstring_examples_hold():
    assert doctest.testmod(choosing).failed == 0


def test_candidates_are_the_strict_correct_turns_once_per_source_in_the_order_found():
    def rec(i, t, status, digest, strict=None):
        v = to_dict(_verdict(status, digest=digest))
        v["policy_status"]["strict"] = strict or status
        return {"task": "gelu", "sample_idx": i, "turn": t, "verdict": v}

    verdicts = [rec(0, 1, "mismatch", "a"), rec(1, 1, "correct", "b"), rec(0, 2, "correct", "b")]
    verdicts += [rec(2, 1, "correct", "c", strict="torch_compute"), rec(3, 1, "correct", "d")]
    samples = [
        {"sample_idx": v["sample_idx"], "turn": v["turn"], "code": f"code {v['verdict']['candidate_hash']}"}
        for v in verdicts
    ]
    found = candidates(verdicts, samples)
    assert [(c.hash, c.episode, c.turn, c.order, c.code) for c in found] == [
        ("b", 1, 1, 0, "code b"),
        ("d", 3, 1, 1, "code d"),
    ], "a kernel correct only under the kernelbench policy (torch_compute under strict) is no candidate"


def _choose(speeds: dict[str, float | None], fails: dict[str, str], finalists: int):
    """choose() over candidates named by hash with search speedups; `fails`: hash -> the variant it fails at.
    Re-verified speedups are the search's plus 0.1 (a re-measure); returns (chosen, tried, calls)."""
    cands = [Candidate(h, "", i, 1, i, s) for i, (h, s) in enumerate(speeds.items())]
    calls: list[list[str]] = []

    def checks_for(c: Candidate) -> list[Check]:
        return [Check(c, v, TASK, None) for v in ("original", "half", "double")]  # type: ignore[arg-type]

    def run_checks(checks: list[Check]) -> dict:
        calls.append(sorted({ch.candidate.hash for ch in checks}))
        out = {}
        for ch in checks:
            bad = fails.get(ch.candidate.hash) == ch.variant
            speed = None if ch.candidate.speedup is None or ch.variant != "original" else ch.candidate.speedup + 0.1
            out[ch.key] = _verdict("mismatch" if bad else "correct", speed)
        return out

    chosen, tried, _ = choose(rank(cands), checks_for, run_checks, finalists)
    return chosen, [c.hash for c in tried], calls


def test_the_fastest_kernel_that_passes_at_every_size_is_chosen():
    # "fast" is the fastest but hard-codes its size: it fails at double the size and is never chosen
    chosen, tried, calls = _choose({"slow": 1.1, "fast": 3.0, "mid": 2.0, "untimed": None}, {"fast": "double"}, 3)
    assert chosen.hash == "mid" and tried == ["fast", "mid", "slow"] and calls == [["fast", "mid", "slow"]]


def test_when_no_finalist_passes_the_next_ones_are_tried():
    chosen, tried, calls = _choose({"a": 3.0, "b": 2.0, "c": 1.0}, {"a": "half", "b": "original"}, 2)
    assert chosen.hash == "c" and tried == ["a", "b", "c"] and calls == [["a", "b"], ["c"]]
    chosen, _, _ = _choose({"a": 3.0}, {"a": "half"}, 2)
    assert chosen is None


def test_without_timings_the_earliest_found_that_passes_is_chosen_one_at_a_time():
    chosen, tried, calls = _choose({"first": None, "second": None, "third": None}, {"first": "double"}, 3)
    assert chosen.hash == "second" and tried == ["first", "second"] and calls == [["first"], ["second"]]
    with pytest.raises(ValueError, match="finalists"):
        choose([], lambda c: [], lambda checks: {}, finalists=0)


# -- the search, with a stand-in verifier: a completion "ok ..." is correct, anything else a mismatch -----------


def _stand_in(calls: list[int]) -> Verifier:
    def run(items):
        calls.append(len(items))
        return [_verdict("correct" if text.startswith("ok") else "mismatch", digest=text) for _, text, _ in items]

    return Verifier(run, name="stand-in")


def _replay(tmp_path, rows: dict[tuple[str, int], str]) -> str:
    path = tmp_path / "replay.jsonl"
    path.write_text(
        "".join(json.dumps({"task": k, "sample_idx": i, "completion": c}) + "\n" for (k, i), c in rows.items())
    )
    return f"replay:{path}"


def _search(tmp_path, model: str, budget: int, calls: list[int], turns: int = 2, wave: int = 2):
    env = KernelEnv("triton", max_turns=turns, verifier=_stand_in(calls), sample_budget=budget)
    plan = SearchPlan(TASK, model, "triton", turns, wave, SamplingParams(), time.monotonic() + 60)
    return search(plan, env, TurnLogs(tmp_path / "out"), load_backend(model))


def test_search_refines_failed_episodes_then_starts_a_new_wave_within_the_budget(tmp_path):
    rows = {("gelu", 0): "bad 0", ("gelu", 1): "ok 1", ("gelu#sample0#turn2", 0): "ok 0b", ("gelu", 2): "bad 2"}
    rows |= {("gelu", 3): "bad 3", ("gelu#sample2#turn2", 0): "bad 2b"}
    calls: list[int] = []
    episodes, notes = _search(tmp_path, _replay(tmp_path, rows), budget=5, calls=calls)
    # wave 1: episodes 0, 1 (turn 1), episode 0 turn 2; wave 2: episodes 2, 3 with the 2 verifications left
    assert [len(ep.turns) for ep in episodes] == [2, 1, 1, 1] and calls == [2, 1, 2]
    assert [ep.done_reason for ep in episodes[:2]] == ["correct", "correct"]
    assert any("budget" in n for n in notes)
    verdicts = [json.loads(line) for line in (tmp_path / "out/verdicts.jsonl").read_text().splitlines()]
    assert [(v["sample_idx"], v["turn"]) for v in verdicts] == [(0, 1), (1, 1), (0, 2), (2, 1), (3, 1)]

    calls.clear()  # a rerun with a larger budget continues where the first stopped
    episodes, notes = _search(tmp_path, _replay(tmp_path, rows), budget=7, calls=calls)
    assert calls == [1] and [len(ep.turns) for ep in episodes] == [2, 1, 2, 1], "only episode 2's turn 2 is new"
    assert "the model gave no more completions" in notes  # episode 3 has no turn 2, a new wave no turn 1


def test_search_stops_when_the_model_has_no_more_completions(tmp_path):
    calls: list[int] = []
    episodes, notes = _search(tmp_path, _replay(tmp_path, {("gelu", 0): "ok"}), budget=10, calls=calls, wave=1)
    assert len(episodes) == 1 and calls == [1] and "the model gave no more completions" in notes


def test_search_starts_no_round_after_the_time_limit(tmp_path):
    calls: list[int] = []
    env = KernelEnv("triton", max_turns=2, verifier=_stand_in(calls), sample_budget=4)
    model = _replay(tmp_path, {("gelu", 0): "ok"})
    plan = SearchPlan(TASK, model, "triton", 2, 2, SamplingParams(), deadline=time.monotonic() - 1)
    episodes, notes = search(plan, env, TurnLogs(tmp_path / "out"), load_backend(model))
    assert episodes == [] and calls == [] and notes == ["the time limit was reached"]
