"""`kernelzero eval --turns T`: episodes through the kernel environment, per-turn metrics, resume, and T = 1 as before.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/evaluation/test_multiturn.py`
The end-to-end test scripts a replay file so that turn 1 fails (a syntax error, rejected before anything runs) and
turn 2 succeeds (a real Triton kernel verified through the pool on CPU, interpreter only). The other runs use
completions the verifier rejects before starting a process, so they take well under a second each.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import kernelzero.env.verifier as env_verifier
import kernelzero.evaluation.config as eval_config
from kernelzero.cli import build_parser
from kernelzero.cli.eval import config_from
from kernelzero.evaluation.run import EvalConfig, run_eval
from kernelzero.report import compare_runs, load_run
from kernelzero.report.turns import after_turns, per_turn
from kernelzero.types import Verdict, to_dict

ROOT = Path(__file__).resolve().parents[2]
GELU = "level1/21_GELU"
BROKEN = "```python\nimport torch\nclass ModelNew(:\n    pass\n```\n"  # format_error: no process is started
NO_CODE = "I could not write this kernel."


def _replay(tmp_path: Path, lines: list[tuple[str, int, str, int]]) -> str:
    path = tmp_path / "replay.jsonl"
    rows = [{"task": t, "sample_idx": i, "completion": c, "output_tokens": n} for t, i, c, n in lines]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"replay:{path}"


def _config(tmp_path: Path, model: str, turns: int, samples: int = 1) -> EvalConfig:
    return EvalConfig(
        suite="kz-basic",
        model=model,
        backend="triton",
        out=str(tmp_path / "run"),
        samples=samples,
        tasks=(GELU,),
        preset="smoke",
        device="cpu",
        store=None,
        turns=turns,
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _no_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a resumed run verified again")

    monkeypatch.setattr(env_verifier, "verify_many", refuse)  # the pool behind Verifier.pool


@pytest.mark.slow
def test_turn_one_fails_turn_two_succeeds_end_to_end_and_a_finished_run_verifies_nothing(tmp_path, monkeypatch):
    # compile_check off: the interpreter run decides; compiling for sm_90 on CPU would triple the time
    monkeypatch.setattr(eval_config, "options_for", functools.partial(eval_config.options_for, compile_check=False))
    good = (ROOT / "tests/kernels/correct/triton_gelu.py").read_text()
    model = _replay(tmp_path, [(GELU, 0, BROKEN, 40), (f"{GELU}#sample0#turn2", 0, f"```python\n{good}```\n", 300)])
    cfg = _config(tmp_path, model, turns=3)
    result = run_eval(cfg)
    out = Path(cfg.out)
    verdicts = _lines(out / "verdicts.jsonl")
    assert [(v["turn"], v["verdict"]["status"]) for v in verdicts] == [(1, "format_error"), (2, "correct")]
    assert verdicts[1]["policies"]["strict"] == "correct", "multi-turn runs verify under the strict policy"
    samples = _lines(out / "samples.jsonl")
    assert [(s["turn"], s["prompt_version"]) for s in samples] == [(1, "triton-v1"), (2, "triton-v1+env-v1")]
    episode = _lines(out / "episodes.jsonl")[-1]["episode"]
    assert episode["done_reason"] == "correct" and len(episode["turns"]) == 2, "a correct turn ends the episode"
    assert "not valid Python" in episode["turns"][0]["observation"], "turn 2 was prompted with turn 1's feedback"
    rows = result["per_turn"]
    assert [(r["turn"], r["pass@1"], r["correct_at_turn"]) for r in rows] == [(1, 0.0, 0), (2, 1.0, 1)]
    assert [(r["avg_output_tokens"], r["avg_tokens_so_far"]) for r in rows] == [(40.0, 40.0), (300.0, 340.0)]
    assert result["overall"]["pass@k"]["1"] == 1.0 and result["overall"]["avg_output_tokens"] == 340.0
    assert result["turns"] == 3 and json.loads((out / "metrics.json").read_text())["per_turn"] == rows
    report = (out / "report.md").read_text()
    assert "Per turn" in report and "| 2 | 1 | 1 | 1 | 100.0 |" in report

    before = {p.name: p.read_text() for p in out.glob("*.jsonl")}
    _no_verification(monkeypatch)
    assert run_eval(cfg)["per_turn"] == rows
    assert {p.name: p.read_text() for p in out.glob("*.jsonl")} == before, "nothing generated or verified twice"


def test_resume_continues_mid_episode_without_generating_again(tmp_path):
    model = _replay(
        tmp_path,
        [(GELU, 0, NO_CODE, 5), (f"{GELU}#sample0#turn2", 0, BROKEN, 6), (f"{GELU}#sample0#turn3", 0, NO_CODE, 7)]
        + [(GELU, 1, BROKEN, 8), (f"{GELU}#sample1#turn2", 0, BROKEN, 9), (f"{GELU}#sample1#turn3", 0, BROKEN, 10)],
    )
    cfg = _config(tmp_path, model, turns=3, samples=2)
    first = run_eval(cfg)
    out = Path(cfg.out)
    assert [r["reached"] for r in first["per_turn"]] == [2, 2, 2], "failing episodes run all their turns"
    assert _lines(out / "episodes.jsonl")[-1]["episode"]["done_reason"] == "max_turns"
    # a run killed after generating turn 3 and before verifying it, and one killed between its two writes
    samples = (out / "samples.jsonl").read_text()
    episodes, verdicts = _lines(out / "episodes.jsonl"), _lines(out / "verdicts.jsonl")
    keep = [e for e in episodes if not (e["sample_idx"] == 0 and e["turn"] == 3)]
    (out / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in keep))
    lost = [v for v in verdicts if not (v["turn"] == 3)]
    (out / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in lost))
    second = run_eval(cfg)
    assert (out / "samples.jsonl").read_text() == samples, "turn 3 was not generated again"
    assert sorted((v["sample_idx"], v["turn"]) for v in _lines(out / "verdicts.jsonl")) == sorted(
        (v["sample_idx"], v["turn"]) for v in verdicts
    )
    assert second["per_turn"] == first["per_turn"]


def test_one_turn_keeps_the_one_shot_run_folder(tmp_path):
    model = _replay(tmp_path, [(GELU, 0, BROKEN, 5)])
    cfg = _config(tmp_path, model, turns=1)
    result = run_eval(cfg)
    out = Path(cfg.out)
    assert "turns" not in json.loads((out / "run.json").read_text())["config"]
    assert "turn" not in _lines(out / "samples.jsonl")[0] and "turn" not in _lines(out / "verdicts.jsonl")[0]
    assert "per_turn" not in result and not (out / "episodes.jsonl").exists()
    with pytest.raises(ValueError, match="turns"):  # the folder holds a one-shot run
        run_eval(_config(tmp_path, model, turns=2))


def test_cli_turns_flag_and_its_own_default_folder():
    args = build_parser().parse_args(["eval", "kz-basic", "--turns", "3"])
    cfg = config_from(args)
    assert cfg.turns == 3 and cfg.out.endswith("-triton-t3")
    assert config_from(build_parser().parse_args(["eval", "kz-basic"])).turns == 1
    with pytest.raises(ValueError, match="turns"):
        EvalConfig(suite="kz-basic", model="replay:x", backend="triton", out="x", turns=0)


def _verdict(status: str, speedup: float | None = None) -> dict:
    v = Verdict(status, GELU, "h", "c", "triton", "default", "H200", "done", speedup_eager=speedup)
    return to_dict(v)


def _turn_records() -> tuple[list[dict], list[dict]]:
    # episode 0: wrong, correct 0.8x, correct 1.6x; episode 1: correct 1.2x at turn 1, then done
    plan = [(0, 1, "mismatch", None, 100), (0, 2, "correct", 0.8, 50), (0, 3, "correct", 1.6, 70)]
    plan += [(1, 1, "correct", 1.2, 200)]
    verdicts = [
        {"task": GELU, "sample_idx": i, "turn": t, "level": 1, "verdict": _verdict(s, x)} for i, t, s, x, _ in plan
    ]
    samples = [
        {"task": GELU, "task_hash": "h", "sample_idx": i, "turn": t, "level": 1, "backend": "triton", "model": "m"}
        | {"prompt_version": "p", "completion": "", "code": "", "output_tokens": n}
        for i, t, _, _, n in plan
    ]
    return samples, verdicts


def test_after_t_turns_an_episode_counts_its_best_turn_so_far():
    samples, verdicts = _turn_records()
    view_samples, view = after_turns(samples, verdicts, upto=2)
    best = {r["sample_idx"]: (r["verdict"]["status"], r["verdict"]["speedup_eager"]) for r in view}
    assert best == {0: ("correct", 0.8), 1: ("correct", 1.2)} and all("turn" not in r for r in view)
    assert {s.sample_idx: s.output_tokens for s in view_samples} == {0: 150, 1: 200}, "tokens are summed"
    rows = per_turn(samples, verdicts)
    # after 1 turn: episode 1 only (1 of 2) -> 50 %; fast_1 (first episode, 0): wrong, then 0.8x, then 1.6x
    assert [r["pass@1"] for r in rows] == [0.5, 1.0, 1.0]
    assert [r["fast_1"] for r in rows] == [0.0, 0.0, 1.0]
    assert [r["reached"] for r in rows] == [2, 1, 1] and [r["avg_output_tokens"] for r in rows] == [150.0, 50.0, 70.0]


def test_report_reads_a_multi_turn_folder(tmp_path):
    samples, verdicts = _turn_records()
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (tmp_path / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    _, loaded, records = load_run(tmp_path)
    assert len(loaded) == len(records) == 2, "one record per episode: its best turn"
    assert "| 1.39x |" in compare_runs([tmp_path])  # geomean of the best turns' speedups: sqrt(1.6 * 1.2)
