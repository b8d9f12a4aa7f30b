"""bench/train_gpu.py's miniature calls may come in any order: each says first what state it needs and whether it
found it, and a later call without call 1's state stops at once (no warm start redone, no crash at the end)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def call(run: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "train_gpu.py"), "miniature", "--run", str(run), "--out", str(out)]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_call_2_without_call_1_state_stops_at_once_saying_what_is_missing(tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    done = call(run, out, "--call", "2")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[0] == f"[call 2] needs {run / 'warm_start/config.json'} (the warm-started policy, from call 1): NOT FOUND"
    )
    assert "NOT FOUND" in lines[1] and "curve.jsonl" in lines[1]
    assert "STOP" in lines[-1] and "--from-scratch" in lines[-1]
    assert not run.exists()  # nothing was started
    state = json.loads((out / "miniature_state_call2.json").read_text())
    assert state["found"] == {"warm_start/config.json": False, "curve.jsonl": False, "checkpoints": False}


def test_call_3_finds_call_1_state(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import train_gpu
    finally:
        sys.path.remove(str(ROOT / "bench"))
    run = tmp_path / "run"
    (run / "warm_start").mkdir(parents=True)
    (run / "warm_start" / "config.json").write_text("{}")
    (run / "curve.jsonl").write_text("{}\n")
    args = train_gpu.argparse.Namespace(call=3, run=str(run), out=str(tmp_path / "out"), from_scratch=False)
    assert train_gpu.miniature_state(args)
    args.run = str(tmp_path / "empty")
    assert not train_gpu.miniature_state(args)
    args.from_scratch = True
    assert train_gpu.miniature_state(args)
