"""The GPU gate's pytest plugin (scripts/gpu_table.py), on CPU: rows written as tests finish, by the xdist
controller only, a run killed midway keeps its rows, a skip for a missing module fails the run, `--gate-all`
keeps the `gpu` tests and the named paths."""

from __future__ import annotations

import json
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
            assert float(cells[4]) >= 0  # when it finished, from the session's start
            rows[cells[0]] = cells[1:4]
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


def test_gate_durations_runs_the_longest_first_and_hands_out_one_test_at_a_time(tmp_path: Path):
    """--gate-durations: each worker's order is the durations' (longest first, an unknown test as the longest), and
    xdist hands out one test at a time: with its default chunk of 5 here, worker 0 would start with 5 in a row."""
    (tmp_path / "pytest.ini").write_text(INI)
    names = ["a", "b", "c", "d", "e", "f", "new"]
    (tmp_path / "test_d.py").write_text("".join(f"def test_{n}():\n    pass\n\n" for n in names))
    seconds = {"a": 1.0, "b": 9.0, "c": 5.0, "d": 7.0, "e": 3.0, "f": 0.5}
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({f"test_d.py::test_{n}": s for n, s in seconds.items()}))
    cmd, env = _pytest(tmp_path, "-p", "no:xdist", "--gate-durations", str(durations), "--collect-only", "test_d.py")
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    order = [line.split("::")[1] for line in run.stdout.splitlines() if "::" in line]
    # new (unknown: 9 s) and b (9 s) tie, collected order kept: b, new; then d 7, c 5, e 3, a 1, f 0.5
    assert order == ["test_b", "test_new", "test_d", "test_c", "test_e", "test_a", "test_f"], run.stdout

    # 40 tests, 2 workers, known to take 40 s, 39 s, ...: paired (t0, t3) for worker 0 and (t1, t2) for worker 1
    body = "import os\n\n@pytest.mark.parametrize('k', range(40))\ndef test_t(k, tmp_path_factory):\n"
    body += "    open(os.environ['KZ_T_OUT'] + f'/{k}', 'w').write(os.environ['PYTEST_XDIST_WORKER'])\n"
    (tmp_path / "test_d.py").write_text("import pytest\n" + body)
    durations.write_text(json.dumps({f"test_d.py::test_t[{k}]": 40.0 - k for k in range(40)}))
    ran = tmp_path / "ran"
    ran.mkdir()
    cmd, env = _pytest(tmp_path, "-n", "2", "--gpu-table", str(tmp_path / "t.md"), "--gate-durations", str(durations))
    run = subprocess.run(
        [*cmd, "test_d.py"],
        cwd=tmp_path,
        env={**env, "KZ_T_OUT": str(ran)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    worker = {k: (ran / str(k)).read_text() for k in range(40)}
    assert worker[0] == worker[3] != worker[1] == worker[2], worker


def test_gate_order_pairs_the_first_two_per_worker_longest_with_shortest():
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_table

    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    items = [Item(f"t.py::test_{k}") for k in range(10)]
    known = {f"t.py::test_{k}": float(k) for k in range(10)}
    order = [item.nodeid.split("_")[1] for item in gpu_table.gate_order(items, known, workers=2)]
    # longest first: 9 8 7 6 | 5 ...; worker 0 starts with (9, 6), worker 1 with (8, 7)
    assert order == ["9", "6", "8", "7", "5", "4", "3", "2", "1", "0"]
    assert [i.nodeid for i in gpu_table.gate_order(items, known, workers=1)][0] == "t.py::test_9"
    assert gpu_table.gate_order(items[:3], known, workers=2) == [items[2], items[1], items[0]]  # too few to pair


def test_durations_reads_every_row_of_the_tables_and_a_later_table_wins(tmp_path: Path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_table

    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text(
        "| test | outcome | seconds | reason |\n|---|---|---|---|\n"
        "| t.py::test_a | passed | 3.5 |  |\n| t.py::test_b[x \\| y] | failed | 12.0 | assert 1 == 2 |\n"
        "| t.py::test_c | skipped (missing package) | 0.0 | No module named z |\n\n**Stopped by the wall limit**\n"
    )
    second.write_text("| t.py::test_a | passed | 4.0 |  |\n| not a row | passed | x |\n")
    assert gpu_table.durations([str(first), str(second)]) == {
        "t.py::test_a": 4.0,
        "t.py::test_b[x \\| y]": 12.0,
        "t.py::test_c": 0.0,
    }
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_table.py"), "durations", str(first)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(out.stdout)["t.py::test_a"] == 3.5


def test_gate_wait_for_starts_the_workers_but_no_test_until_the_file_appears(tmp_path: Path):
    """--gate-wait-for: the main phase starts while the exclusive one runs; it writes nothing (not even the table's
    header, so the other phase's rows stay under their own) and runs nothing until the file appears."""
    (tmp_path / "pytest.ini").write_text(INI)
    ran = tmp_path / "ran"
    (tmp_path / "test_w.py").write_text(f"def test_a():\n    open({str(ran)!r}, 'w').write('x')\n")
    table, go = tmp_path / "gpu_table.md", tmp_path / "go"
    table.write_text("rows of another phase\n")
    cmd, env = _pytest(tmp_path, "-n", "2", "--gpu-table", str(table), "--gate-wait-for", str(go), "test_w.py")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(8)  # the workers start and collect meanwhile
        assert proc.poll() is None and not ran.exists()
        assert table.read_text() == "rows of another phase\n"
        go.touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and ran.exists(), out
    assert "appeared after" in out
    text = table.read_text()
    assert text.startswith("rows of another phase\n\n## GPU gate, started") and "test_w.py::test_a | passed" in text
