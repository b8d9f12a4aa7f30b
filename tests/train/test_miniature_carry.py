"""bench/miniature_carry.py: the miniature's state leaves a device call in parts under the returned-file limit and
comes back on a fresh machine as a run that resumes (weights rounded to bfloat16 once, no optimizer state);
a missing or foreign part, or a folder with nothing carried, is refused saying so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import miniature_carry as carry  # noqa: E402
from test_train_gpu_calls import _train_gpu  # noqa: E402

sys.path.remove(str(ROOT / "bench"))


def tiny_policy(folder: Path, seed: int) -> dict:
    torch.manual_seed(seed)
    config = transformers.Qwen2Config(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    model = transformers.Qwen2ForCausalLM(config)
    model.generation_config = transformers.GenerationConfig(do_sample=True, top_k=0, eos_token_id=2)
    model.save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text("{}")
    return {k: v.clone() for k, v in model.state_dict().items()}


def a_run(tmp_path: Path, steps: tuple[int, ...] = (4, 8)) -> tuple[Path, dict]:
    run = tmp_path / "run"
    tiny_policy(run / "warm_start", 0)
    weights = {}
    for i, step in enumerate(steps):
        ckpt = run / "checkpoints" / f"checkpoint-{step}"
        weights = tiny_policy(ckpt, i + 1)
        (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        (ckpt / "optimizer.pt").write_bytes(b"x" * 1000)  # optimizer state never travels
    (run / "tasks").mkdir()
    (run / "tasks" / "test.jsonl").write_text('{"name": "t"}\n')
    (run / "curve.jsonl").write_text('{"label": "warm start", "pass1": 0.4}\n')
    return run, weights


def test_the_last_checkpoint_travels_in_parts_and_resumes_on_a_fresh_machine(tmp_path):
    run, weights = a_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "miniature_gains.json").write_text("[]")
    manifest = carry.pack(run, out, [out / "miniature_gains.json"], part_bytes=20_000)
    assert manifest["step"] == 8 and manifest["policy"] == "checkpoints/checkpoint-8"
    parts = sorted(out.glob(f"{carry.BLOB}.part*"))
    assert len(parts) == len(manifest["parts"]) >= 2 and all(p.stat().st_size <= 20_000 for p in parts)
    assert not (out / "miniature_gains.json").exists()  # moved into the tarball
    kept = tmp_path / "kept"
    carry.keep(out, kept)
    assert json.loads((kept / "report" / "miniature_gains.json").read_text()) == []
    fresh = tmp_path / "fresh"
    assert carry.restore(kept, fresh) == 8
    assert (fresh / "curve.jsonl").read_text() == (run / "curve.jsonl").read_text()
    ckpt = fresh / "checkpoints" / "checkpoint-8"
    assert json.loads((ckpt / "trainer_state.json").read_text())["global_step"] == 8
    assert not (ckpt / "optimizer.pt").exists() and not (fresh / "checkpoints" / "checkpoint-4").exists()
    assert (fresh / "policy" / "step.txt").read_text() == "8"
    assert (fresh / "warm_start" / "config.json").exists()
    assert not list((fresh / "warm_start").glob("*.safetensors"))  # only the latest policy's weights travel
    for folder in (ckpt, fresh / "policy"):  # the carried configs, not ones save_pretrained wrote afresh
        for name in ("config.json", "generation_config.json"):
            assert (folder / name).read_text() == (run / "checkpoints" / "checkpoint-8" / name).read_text()
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        got = model.state_dict()
        for name, value in weights.items():
            assert torch.equal(got[name], value.to(torch.bfloat16).to(torch.float32)), name
        assert got["lm_head.weight"].data_ptr() == got["model.embed_tokens.weight"].data_ptr()


def test_a_run_with_only_its_warm_start_carries_the_warm_start(tmp_path):
    run, _ = a_run(tmp_path, steps=())
    out = tmp_path / "out"
    out.mkdir()
    assert carry.pack(run, out)["step"] == 0
    fresh = tmp_path / "fresh"
    assert carry.restore(out, fresh) == 0
    assert list((fresh / "warm_start").glob("*.safetensors")) and not (fresh / "policy").exists()


def test_a_missing_or_foreign_part_is_refused_before_anything_is_kept(tmp_path):
    run, _ = a_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    carry.pack(run, out, part_bytes=20_000)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "older").write_text("the state kept before")
    last = sorted(out.glob(f"{carry.BLOB}.part*"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="sha256"):
        carry.keep(out, kept)
    assert (kept / "older").exists()
    last.unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        carry.restore(out, tmp_path / "fresh")
    with pytest.raises(FileNotFoundError, match="nothing to carry"):
        carry.pack(tmp_path / "empty", out)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "miniature_carry.py"), "keep", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--carry-out" in done.stderr


def test_a_call_on_a_fresh_machine_takes_the_carried_state_and_gives_back_at_most_8_files(tmp_path, capsys):
    """--carry-out ends a call with the state and the four report files the reader needs (8 files at most, the rest
    in the tarball); --carry-in on a machine without the warm start restores it, so the state check passes; with
    nothing carried it says so and the state check stops the call as before."""
    train_gpu = _train_gpu()
    run, _ = a_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for name in ("report.md", "curve.jsonl", "steps.jsonl", "points.jsonl.gz", "gains.json", "run.json", "x.json"):
        (out / f"miniature_{name}").write_text("{}")
    args = train_gpu.argparse.Namespace(
        call=2, run=str(run), out=str(out), carry_out=True, carry_in=None, from_scratch=False
    )
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        train_gpu.carry_out(args)
        assert len(list(out.iterdir())) <= 8
        assert sorted(f.name for f in out.glob("miniature_*")) == sorted(train_gpu.CARRY_KEEPS)
        fresh = tmp_path / "fresh"
        args = train_gpu.argparse.Namespace(
            call=2, run=str(fresh), out=str(tmp_path / "out2"), carry_out=False, carry_in=str(out), from_scratch=False
        )
        train_gpu.carry_in(args)
        assert train_gpu.miniature_state(args)
        assert (fresh / "policy" / "step.txt").read_text() == "8"
        args.run, args.carry_in = str(tmp_path / "other"), str(tmp_path / "nothing")
        train_gpu.carry_in(args)
        assert "nothing carried" in capsys.readouterr().out
        assert not train_gpu.miniature_state(args)
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_a_fork_starts_a_new_run_from_the_kept_policy_with_its_own_grpo_settings(tmp_path, capsys):
    """`fork`: the kept run's latest policy becomes a new run's warm start; GRPO's state and curve stay behind; the
    fork may set its own GRPO values, while another tasks setting is still refused (the splits are the source's)."""
    from kernelzero.train import coder
    from kernelzero.train.config import load_config

    run, weights = a_run(tmp_path)
    cfg = load_config(ROOT / "configs" / "tiny-cpu.yaml", {"run_dir": str(run)})
    coder._check_run_json(cfg, run)  # the source's frozen settings
    out, kept, forked = tmp_path / "out", tmp_path / "kept", tmp_path / "forked"
    out.mkdir()
    carry.pack(run, out, part_bytes=20_000)
    carry.keep(out, kept)
    manifest = carry.fork(kept, forked)
    assert manifest["step"] == 0 and manifest["policy"] == "warm_start"
    fresh = tmp_path / "fresh"
    assert carry.restore(forked, fresh) == 0
    for name in ("checkpoints", "policy", "curve.jsonl"):
        assert not (fresh / name).exists(), name
    assert (fresh / "tasks" / "test.jsonl").read_text() == (run / "tasks" / "test.jsonl").read_text()
    assert json.loads((fresh / "forked.json").read_text())["step"] == 8
    loaded = transformers.Qwen2ForCausalLM.from_pretrained(fresh / "warm_start").state_dict()
    for k, v in weights.items():  # checkpoint-8's weights, rounded to bfloat16 once
        assert torch.equal(loaded[k], v.to(torch.bfloat16).float()), k
    other_lr = load_config(ROOT / "configs" / "tiny-cpu.yaml", {"run_dir": str(fresh), "grpo": {"lr": 5e-3}})
    coder._check_run_json(other_lr, fresh)  # the fork's own GRPO settings, frozen from now on
    assert json.loads((fresh / "run.json").read_text())["config"]["grpo"]["lr"] == 5e-3
    other_tasks = load_config(ROOT / "configs" / "tiny-cpu.yaml", {"run_dir": str(fresh), "tasks": {"n_sft": 3}})
    with pytest.raises(ValueError, match="tasks.n_sft"):
        coder._check_run_json(other_tasks, fresh)
    with pytest.raises(SystemExit, match="already holds a carry"):
        carry.fork(kept, forked)
    capsys.readouterr()
    train_gpu = _train_gpu()
    args = train_gpu.argparse.Namespace(call=2, run=str(fresh), out=str(tmp_path / "o"), from_scratch=False)
    assert train_gpu.miniature_state(args)
    assert "a fork: its warm start is" in capsys.readouterr().out
