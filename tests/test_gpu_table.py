"""The GPU gate's pytest plugin (scripts/gpu_table.py), on CPU: rows written as tests finish, by the xdist
controller only, a run killed midway keeps its rows, a skip for a missing module fails the run, `--gate-all`
keeps the `gpu` tests and the named paths."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import time
import pytest

def test_ok():
    pass

def test_bad():
    assert 1 == 2, "one is not two"

def test_missing_module():
    pytest.importorskip("kz_no_such_module")

@pytest.mark.skip(reason="a plain skip")
def test_plain_skip():
    pass

@pytest.mark.gpu
def test_marked_gpu():
    pass
"""
INI = "[pytest]\nmarkers =\n    gpu: needs a GPU\n"


def _pytest(tmp_path: Path, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts"), "KZ_GIT_COMMIT": "abc1234"}
    return [sys.executable, "-m", "pytest", "-p", "gpu_table", "-p", "no:cacheprovider", "-q", *args], env


def _rows(table: Path) -> dict[str, list[str]]:
    rows = {}
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if line.startswith("| ") and "::" in cells[0]:
            assert cells[0] not in rows, f"{cells[0]} written twice"
            rows[cells[0]] = cells[1:]
    return rows


def test_rows_outcomes_and_a_missing_module_fails_the_run_under_xdist(tmp_path: Path):
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_a.py").write_text(TESTS)
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "test_k.py").write_text("def test_kept():\n    pass\n")
    table = tmp_path / "out" / "gpu_table.md"
    cmd, env = _pytest(tmp_path, "-n", "2", "--gpu-table", str(table), "test_a.py", "keep")
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, run.stdout + run.stderr
    rows = _rows(table)
    assert rows["test_a.py::test_ok"][0] == "passed"
    assert rows["test_a.py::test_bad"][0] == "failed" and "one is not two" in rows["test_a.py::test_bad"][2]
    assert rows["test_a.py::test_missing_module"][0] == "skipped (missing package)"
    assert "kz_no_such_module" in rows["test_a.py::test_missing_module"][2]
    assert rows["test_a.py::test_plain_skip"] == ["skipped", "0.0", "a plain skip"]
    assert len(rows) == 6
    summary = table.read_text()
    assert "3 passed, 1 failed, 0 errors, 1 skipped, 1 skipped for a missing package" in summary
    assert "commit abc1234" in summary and "The gate fails" in summary
    details = (tmp_path / "out" / "gpu_table_failures.md").read_text()
    assert "## test_a.py::test_bad (call)" in details and "one is not two" in details and "test_ok" not in details


def test_gate_all_keeps_gpu_tests_and_the_named_paths(tmp_path: Path):
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_a.py").write_text(TESTS)
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "test_k.py").write_text("def test_kept():\n    pass\n")
    table = tmp_path / "gpu_table.md"
    cmd, env = _pytest(tmp_path, "--gpu-table", str(table), "--gate-all", "keep", "test_a.py", "keep")
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(_rows(table)) == ["keep/test_k.py::test_kept", "test_a.py::test_marked_gpu"]


def test_a_run_killed_midway_keeps_the_rows_it_finished(tmp_path: Path):
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_b.py").write_text(
        "import time\n\ndef test_first():\n    pass\n\ndef test_hangs():\n    time.sleep(120)\n"
    )
    table = tmp_path / "gpu_table.md"
    cmd, env = _pytest(tmp_path, "--gpu-table", str(table), "test_b.py")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "test_first" not in (table.read_text() if table.exists() else ""):
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    rows = _rows(table)
    assert rows == {"test_b.py::test_first": ["passed", rows["test_b.py::test_first"][1], ""]}
    assert "passed," not in table.read_text()  # no summary: the run never finished


def test_gate_stages_sums_the_verdict_logs_durations(tmp_path: Path):
    """scripts/gate_stages.py: durations per stage over the verdicts (not wall-clock stamps, sizes or per-call
    ms), statuses counted, a line that is not JSON counted and skipped, a missing log said."""
    import json

    sys.path.insert(0, str(ROOT / "scripts"))
    import gate_stages

    log = tmp_path / "verdicts.jsonl"
    rows = [
        {"status": "correct", "stage_seconds": {"total": 10.0, "gpu_mem_wait": 4.0, "gpu_lease_at": 1.7e9}},
        {"status": "correct", "stage_seconds": {"total": 20.0, "gpu_excl": 3.5, "solo_excl": 1.25}},
        {"status": "mismatch", "stage_seconds": {"total": 30.0, "gpu_mem_gib": 12.0, "ref_forward_ms": 3.0}},
        {"status": "format_error", "stage_seconds": {}},
    ]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    text = gate_stages.summary(log)
    assert "(4 verdicts)" in text and "correct 2, mismatch 1, format_error 1" in text
    assert "| total | 3 | 20.00 | 30.00 | 30.00 | 60.0 |" in text
    assert "The GPU held alone (gpu_excl + solo_excl): 4.8 s in all" in text
    assert "| gpu_mem_wait | 1 | 4.00 |" in text
    assert "gpu_lease_at" not in text and "gpu_mem_gib" not in text and "ref_forward_ms" not in text
    assert "1 line(s) of the log were not JSON" in text
    assert "No verdict log" in gate_stages.summary(tmp_path / "absent.jsonl")
    log.write_text(json.dumps(rows[0]) + "\n")
    assert "held alone" not in gate_stages.summary(log)  # nothing held the GPU alone: no such line


def test_gate_resume_leaves_out_what_an_earlier_table_shows_passed(tmp_path: Path):
    """--gate-resume: a second run goes on from the first one's table, ids with spaces included."""
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_r.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('x', ['a b', 'c|d'])\ndef test_p(x):\n    pass\n\n"
        "def test_bad():\n    assert False\n"
    )
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    cmd, env = _pytest(tmp_path, "--gpu-table", str(first), "test_r.py")
    subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert [o[0] for o in _rows(first).values()].count("passed") == 2
    cmd, env = _pytest(tmp_path, "--gpu-table", str(second), "--gate-resume", str(first), "test_r.py")
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "2 deselected" in run.stdout, run.stdout + run.stderr
    assert list(_rows(second)) == ["test_r.py::test_bad"]
