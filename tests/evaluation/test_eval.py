"""`kernelzero eval`: the run folder, resuming after SIGKILL (also mid-line), torn-line repair."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelzero.evaluation.jsonl import JsonlLog

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "kernels"
TASKS = {  # task -> completions (sample 0, sample 1)
    "level1/21_GELU": ["correct/triton_gelu.py", "wrong/triton_gelu_bad_mask.py"],
    "level1/24_LeakyReLU": ["correct/triton_leaky_relu.py", "wrong/triton_syntax_error.py"],
    "level1/11_Sum_Over_Dim": ["correct/triton_sum_dim.py", "wrong/triton_sum_wrong_axis.py"],
}


def _replay(tmp_path: Path) -> Path:
    lines = []
    for task, files in TASKS.items():
        for idx, name in enumerate(files):
            code = (KERNELS / name).read_text()
            lines.append(
                json.dumps({"task": task, "sample_idx": idx, "completion": f"Answer:\n```python\n{code}```\n"})
            )
    path = tmp_path / "replay.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cmd(replay: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kernelzero",
        "eval",
        "kz-basic",
        "--preset",
        "smoke",
        "-n",
        "2",
        "--model",
        f"replay:{replay}",
        "--backend",
        "triton",
        "--out",
        str(out),
        "--jobs",
        "2",
        "--device",
        "cpu",
        "--store",
        str(out.parent / "verdicts.sqlite"),
    ]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _keys(path: Path) -> list[tuple]:
    return [(r["task"], r["sample_idx"]) for r in map(json.loads, path.read_text().splitlines()) if r]


def test_jsonl_log_cuts_a_torn_last_line_and_refuses_duplicates(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"k": 1}\n{"k": 2}\n{"k": 3, "trunc')
    log = JsonlLog(path, key=lambda r: r["k"])
    assert log.keys() == {1, 2}
    assert log.append({"k": 3}) and not log.append({"k": 2})
    assert [json.loads(line)["k"] for line in path.read_text().splitlines()] == [1, 2, 3]


def test_jsonl_log_cuts_a_complete_but_invalid_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"k": 1}\n{"k": 2, \n')
    assert JsonlLog(path, key=lambda r: r["k"]).keys() == {1}


@pytest.mark.slow
def test_eval_resumes_after_sigkill_without_duplicates(tmp_path):
    replay, out = _replay(tmp_path), tmp_path / "run"
    proc = subprocess.Popen(
        _cmd(replay, out), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    verdicts = out / "verdicts.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (verdicts.exists() and verdicts.read_text().count("\n") >= 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = verdicts.read_text()
    done_before = before.count("\n")
    assert 2 <= done_before < 6, "the run should have been killed half-way"
    with open(verdicts, "a") as fh:  # a line torn by the kill
        fh.write('{"task": "level1/21_GELU", "sample_idx": 1, "verdict": {"sta')
    samples_before = (out / "samples.jsonl").read_text()

    result = subprocess.run(_cmd(replay, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    keys = _keys(verdicts)
    assert sorted(keys) == sorted((t, i) for t in TASKS for i in range(2)), keys
    assert len(keys) == len(set(keys)) == 6
    assert verdicts.read_text().startswith(before), "records written before the kill must stay as they were"
    assert (out / "samples.jsonl").read_text() == samples_before, "nothing is generated twice"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["correct"] == 3
    assert (out / "report.md").exists()

    again = subprocess.run(_cmd(replay, out), env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and verdicts.read_text().count("\n") == 6, "a finished run verifies nothing again"


def test_eval_refuses_a_run_folder_with_other_settings(tmp_path):
    replay, out = _replay(tmp_path), tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"config": {"suite": "kz-basic", "model": "openai:other"}}))
    result = subprocess.run(_cmd(replay, out), env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "other settings" in result.stderr


def test_per_gpu_flag_reaches_the_config_and_is_checked():
    from kernelzero.cli import build_parser
    from kernelzero.cli.eval import config_from
    from kernelzero.evaluation.config import EvalConfig

    assert config_from(build_parser().parse_args(["eval", "kz-basic", "--per-gpu", "8"])).per_gpu == 8
    assert config_from(build_parser().parse_args(["eval", "kz-basic"])).per_gpu == 2
    with pytest.raises(ValueError, match="per_gpu must be at least 1"):
        EvalConfig(suite="kz-basic", model="replay:x", backend="triton", out="x", per_gpu=0)
