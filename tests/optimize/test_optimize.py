"""`kernelzero optimize` end to end on CPU: search, re-verification at three sizes, the choice, report, resume.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/optimize/test_optimize.py`
A replay file scripts two episodes of GELU at rows=16, cols=16 (16 cannot be halved: the only other size checked is
double, rows=32, cols=32, which keeps the test to six verifications): episode 0 fails its first turn (a syntax error)
and is correct at turn 2 with a general kernel; episode 1 is correct at turn 1 with a kernel that hard-codes the
element count (tests/optimize/kernels/triton_gelu_fixed_size.py). On CPU nothing is timed, so the tie-break ranks
the hard-coded kernel first (found first); re-verified at double the size it fails, so the general kernel is
chosen. Kernels run for real through the pool (Triton interpreter; the sm_90 compile check is off to save time).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import kernelzero.optimize.run as optimize_run
from kernelzero.cli import main
from kernelzero.optimize import OptimizeConfig, run_optimize
from kernelzero.tasks import task_hash
from kernelzero.types import TaskCheck

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "src/kernelzero/tasks/suites/kz_basic/level1/21_GELU.py"
GENERAL = (ROOT / "tests/kernels/correct/triton_gelu.py").read_text()
FIXED = (Path(__file__).parent / "kernels/triton_gelu_fixed_size.py").read_text()


def _answer(code: str) -> str:
    return f"Here is the kernel.\n```python\n{code}```\n"


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    module = tmp_path / "gelu.py"
    module.write_text(GELU.read_text())
    rows = [
        {"task": "gelu", "completion": _answer("import torch\nclass ModelNew(:\n"), "output_tokens": 10},
        {"task": "gelu", "completion": _answer(FIXED), "output_tokens": 20},
        {"task": "gelu#sample0#turn2", "completion": _answer(GENERAL), "output_tokens": 30},
    ]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return module, replay


def _flags(module: Path, replay: Path, out: Path) -> list[str]:
    return [
        "optimize",
        str(module),
        "--model",
        f"replay:{replay}",
        "--budget",
        "4",
        "--turns",
        "2",
        "--size",
        "rows=16",
        "--size",
        "cols=16",
        "--device",
        "cpu",
        "--no-compile-check",
        "--final-trials",
        "3",
        "--out",
        str(out),
    ]


@pytest.mark.slow
def test_optimize_rejects_a_kernel_that_fails_at_double_the_size_and_resumes_without_work(tmp_path, monkeypatch):
    module, replay = _setup(tmp_path)
    out = tmp_path / "out"
    cfg = OptimizeConfig(
        module=str(module),
        model=f"replay:{replay}",
        budget=4,
        turns=2,
        sizes={"rows": 16, "cols": 16},
        device="cpu",
        compile_check=False,
        final_trials=3,
        out=str(out),
    )
    result = run_optimize(cfg)
    assert (result.chosen.episode, result.chosen.turn) == (0, 2), "the general kernel of episode 0, turn 2"
    assert result.verdict.status == "correct" and result.verdict.trials == 3
    reverify = [json.loads(line) for line in (out / "reverify.jsonl").read_text().splitlines()]
    status = {(r["candidate"], r["variant"]): r["verdict"]["status"] for r in reverify}
    fixed = next(h for h, v in status if h != result.chosen.hash)
    assert status[(fixed, "original")] == "correct"
    assert status[(fixed, "double")] == "mismatch", "the hard-coded kernel fails at double the size"
    assert all(status[(result.chosen.hash, v)] == "correct" for v in ("original", "double")) and len(status) == 4

    kernel = result.kernel
    assert kernel == out / "gelu_optimized.py" and GENERAL.strip() in kernel.read_text()
    spec = importlib.util.spec_from_file_location("gelu_optimized", kernel)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)  # ready to import: defines ModelNew
    assert hasattr(loaded, "ModelNew")
    report = result.report.read_text()
    assert "sizes double: rows=32, cols=32" in report and "chosen by the tie-break" in report
    assert "half: every size global is at the floor of 16" in report
    assert "| 1 | 0 | 1 | format_error |" in report and "| 3 | 0 | 2 | correct |" in report, "the history"

    # the same command again: everything is in the folder, nothing is checked, generated or verified again
    def refuse(*args, **kwargs):
        raise AssertionError("a finished run did work again")

    monkeypatch.setattr(optimize_run, "verify_many", refuse)
    monkeypatch.setattr(optimize_run, "check_tasks", refuse)
    monkeypatch.setattr("kernelzero.env.verifier.verify_many", refuse)
    logs = {p.name: p.read_text() for p in out.glob("*.jsonl")}
    assert main(_flags(module, replay, out)) == 0
    assert {p.name: p.read_text() for p in out.glob("*.jsonl")} == logs
    assert result.report.read_text() == report


def test_optimize_refuses_another_runs_folder_and_names_what_is_missing(tmp_path, capsys):
    module, replay = _setup(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"config": {"model": "openai:other"}}))
    assert main(_flags(module, replay, out)) == 2
    assert "holds a run with other settings (model" in capsys.readouterr().err
    plain = tmp_path / "plain.py"
    plain.write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    assert main(["optimize", str(plain), "--model", f"replay:{replay}"]) == 2
    assert "defines no get_inputs() (the forward inputs): add it, or pass --inputs FUNC" in capsys.readouterr().err


def test_optimize_stops_with_the_contract_checks_message_when_the_module_fails(tmp_path):
    module, replay = _setup(tmp_path)
    module.write_text(GELU.read_text().replace("return F.gelu(x)", "return F.gelu(x) @ x"))  # shapes do not chain
    cfg = OptimizeConfig(
        module=str(module), model=f"replay:{replay}", device="cpu", out=str(tmp_path / "out"), sizes={"rows": 256}
    )
    with pytest.raises(ValueError, match="fails the contract check at its own sizes: forward_failed"):
        run_optimize(cfg)


def test_no_passing_candidate_exits_1_and_a_size_the_module_refuses_is_left_out(tmp_path, monkeypatch, capsys):
    module, _ = _setup(tmp_path)
    replay = tmp_path / "broken.jsonl"
    rows = [{"task": "gelu", "completion": "no code here"}, {"task": "gelu#sample0#turn2", "completion": "still none"}]
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def check_tasks(tasks, options):  # the contract check, without its child process: double is refused
        for t in tasks:
            ok = not t.name.endswith("@double")
            yield TaskCheck(t.name, ok, "" if ok else "oom", "" if ok else "out of memory", task_hash(t))

    monkeypatch.setattr(optimize_run, "check_tasks", check_tasks)
    assert main(_flags(module, replay, tmp_path / "out")) == 1
    assert "no candidate passed at every size" in capsys.readouterr().out
    report = (tmp_path / "out/report.md").read_text()
    assert "No candidate passed the strict policy at every size" in report
    assert "double: left out, the module fails there (oom: out of memory)" in report
    assert "| 2 | 0 | 2 | format_error |" in report and not list((tmp_path / "out").glob("*_optimized.py"))
