"""bench/coevolve_carry.py: a co-evolution round's state travels between device calls that do not share a machine.

The real `prepare` phase of configs/tiny-cpu.yaml makes the run folder; a carry of it is restored into an emptied
folder, and prepare run again keeps the carried Coder (its weights rounded to bfloat16, not warm-started again) and
makes a new Proposer start, which never travels. A later phase's carry keeps the finished phases' records and drops
the unfinished phase's. Broken carries, and a run whose next phase needs a Proposer no carry holds, are refused.
"""

from __future__ import annotations

import json
import signal
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import coevolve_carry as cc  # noqa: E402

pytest.importorskip("trl")

CONFIG = ROOT / "configs" / "tiny-cpu.yaml"
INDEX = ROOT / "tests" / "proposer" / "bench_fixture.jsonl"


def _prepared(root: Path, overrides: dict | None = None):
    """configs/tiny-cpu.yaml frozen into `root` and its real prepare phase run, recorded as run_coevolution does."""
    from kernelzero.train.coevolve import State, freeze_run_config, prepare

    overrides = overrides or {
        "run_dir": str(root),
        "warm_start": {"steps": 3},
        "proposer": {"warm_start": {"steps": 3}, "admission": {"benchmark_index": str(INDEX)}},
    }
    cfg, _ = freeze_run_config(CONFIG, overrides)
    State(root / "state.json").finish("prepare", **prepare(cfg))
    return cfg


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _carry(root: Path, tmp: Path, name: str) -> Path:
    out = tmp / name
    out.mkdir()
    cc.pack_run(root, out)
    assert len(list(out.iterdir())) <= 8 and all(f.stat().st_size < 16 << 20 for f in out.iterdir())
    kept = tmp / f"{name}-kept"
    cc.keep(out, kept)
    return kept


def test_a_carry_after_prepare_restores_the_coder_and_prepare_makes_a_new_proposer(tmp_path, monkeypatch):
    import torch

    from kernelzero.train.coevolve import prepare

    monkeypatch.chdir(tmp_path)
    root = Path("run")
    cfg = _prepared(root)
    coder = root / "coder-init" / "warm_start"
    before = _weights(coder)
    (root / "round-1" / "proposer" / "checkpoints" / "checkpoint-1").mkdir(parents=True)  # a cut Proposer phase
    (root / "round-1" / "proposer" / "steps.jsonl").write_text('{"step": 1}\n')
    (root / "proposer").mkdir()
    (root / "proposer" / "admissions.jsonl").write_text('{"round": 1}\n')
    kept = _carry(root, tmp_path, "out")

    import shutil

    shutil.rmtree(root)  # a fresh machine
    manifest = cc.restore_run(kept, root)
    assert manifest["phases"] == ["prepare"] and manifest["policy"] == str(coder.relative_to(root))
    after = _weights(coder)
    assert all(torch.equal(after[k], before[k].to(torch.bfloat16).to(torch.float32)) for k in before)
    assert (
        not (root / "proposer-init").exists() and not (root / "round-1").exists() and not (root / "proposer").exists()
    )
    assert json.loads((root / "state.json").read_text())["finished"] == []  # prepare again, for a new Proposer
    assert (root / "config.yaml").exists() and (root / "pool.jsonl").exists()

    paths = prepare(cfg)  # the next run's prepare: keeps the Coder on disk, warm-starts a Proposer
    assert Path(paths["coder"]) == coder and (Path(paths["proposer"]) / "config.json").exists()
    assert all(torch.equal(_weights(coder)[k], after[k]) for k in after)


def test_a_carry_after_the_proposer_phase_keeps_its_records_and_drops_the_cut_coder_phase(tmp_path, monkeypatch):
    from kernelzero.train.coevolve import State

    monkeypatch.chdir(tmp_path)
    root = Path("run")
    _prepared(root)
    one = root / "round-1"
    (one / "proposer" / "policy").mkdir(parents=True)
    (one / "proposer" / "policy" / "config.json").write_text("{}")
    (one / "proposer" / "proposals.jsonl").write_text('{"p": 0.5}\n')
    (one / "coder_tasks.jsonl").write_text('{"name": "a"}\n')
    State(root / "state.json").finish("round-1/proposer", policy=str(one / "proposer" / "policy"), pool="x")
    (one / "coder" / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (one / "coder" / "steps.jsonl").write_text('{"step": 1}\n')
    kept = _carry(root, tmp_path, "out")

    import shutil

    shutil.rmtree(root)
    manifest = cc.restore_run(kept, root)
    assert manifest["phases"] == ["prepare", "round-1/proposer"]
    phases = [p["phase"] for p in json.loads((root / "state.json").read_text())["finished"]]
    assert phases == ["prepare", "round-1/proposer"]  # the Coder phase is next; its start came with the carry
    assert (one / "proposer" / "proposals.jsonl").exists() and (one / "coder_tasks.jsonl").exists()
    assert not (one / "proposer" / "policy").exists() and not (one / "coder").exists()
    assert (root / "coder-init" / "warm_start" / "model.safetensors").exists()


def test_broken_or_unusable_carries_are_refused(tmp_path, monkeypatch):
    from kernelzero.train.coevolve import State

    monkeypatch.chdir(tmp_path)
    root = Path("run")
    _prepared(root)
    kept = _carry(root, tmp_path, "out")
    part = kept / "policy.bf16.safetensors.part0"
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(ValueError, match="does not match the manifest"):
        cc.restore_run(kept, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()  # nothing written before the parts were checked
    with pytest.raises(SystemExit, match="no state.tar.gz"):
        cc.keep(tmp_path / "empty", tmp_path / "to")
    for phase in ("round-1/proposer", "round-1/coder"):
        State(root / "state.json").finish(phase, policy=str(root / "coder-init" / "warm_start"))
    later = _carry(root, tmp_path, "later")
    with pytest.raises(ValueError, match="round 2's Proposer phase needs round 1's Proposer"):
        cc.restore_run(later, tmp_path / "fresh", rounds=2)


def test_a_call_past_its_budget_is_stopped_with_the_processes_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); open({str(pid_file)!r}, 'w')"
        ".write(str(c.pid)); time.sleep(60)"
    )
    began = time.time()
    assert cc.run_for([sys.executable, "-c", code], 2.0) == -signal.SIGTERM
    assert time.time() - began < 20
    child = Path(f"/proc/{int(pid_file.read_text())}/status")
    deadline = time.time() + 5
    while child.exists() and "\tZ" not in child.read_text() and time.time() < deadline:
        time.sleep(0.1)
    assert not child.exists() or "\tZ" in child.read_text()  # the grandchild went with its process group
    assert cc.run_for([sys.executable, "-c", "pass"], 30.0) == 0


def test_a_round_cut_by_its_call_finishes_on_a_fresh_machine_from_the_carry(tmp_path, monkeypatch):
    """Two calls as on the device: the first, after the real prepare, is cut at once by its budget (the loop's
    process group stopped) and carries the state out; the run folder is emptied (a fresh machine); the second
    restores the carry, redoes prepare's Proposer and finishes the round once, its report in $OUT."""
    import shutil

    from kernelzero.cli.train import parse_overrides

    monkeypatch.chdir(tmp_path)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    sets = ["run_dir=run", f"proposer.admission.benchmark_index={INDEX}", "grpo.anchor_tasks=2", "grpo.steps=1"]
    sets += ["warm_start.steps=20", "eval.samples=1", "proposer.grpo.steps=1"]  # the carry's test, not the method's
    _prepared(Path("run"), parse_overrides(sets))
    train = ["--", "--config", str(CONFIG), *(x for s in sets for x in ("--set", s))]
    first, second = tmp_path / "out1", tmp_path / "out2"
    assert cc.main(["call", "--budget-s", "1", "--reserve-s", "0", "--out", str(first), *train]) == 0
    assert len(list(first.iterdir())) <= 8
    cc.keep(first, tmp_path / "cstate")
    assert cc.read_manifest(tmp_path / "cstate")["phases"] == ["prepare"]
    shutil.rmtree("run")
    assert (
        cc.main(["call", "--budget-s", "400", "--carry-in", str(tmp_path / "cstate"), "--out", str(second), *train])
        == 0
    )
    phases = [p["phase"] for p in json.loads(Path("run/state.json").read_text())["finished"]]
    assert phases == ["prepare", "round-1/proposer", "round-1/coder"]  # prepare again (a new Proposer), then the round
    assert "# Co-evolution" in (second / "coevolve_report.md").read_text()
    assert len(list(second.iterdir())) <= 8
    with tarfile.open(second / cc.TAR) as tar:  # the Proposer's warm-start record and follow check come back too
        names = set(tar.getnames())
    assert {"report/proposer-init_warm_start.jsonl", "report/proposer-init_follow.json"} <= names, sorted(names)
