"""The tiny co-evolution's warm starts (train/coevolve.prepare): `proposer.warm_start_variants` template modules a
set for the Proposer, and with `coevolution.coder_warm_keep_sft` the Coder's warm start fits the same modules (with
their kernels) beside its own sft split rather than instead of it. The real prepare of configs/tiny-cpu.yaml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "tiny-cpu.yaml"
INDEX = ROOT / "tests" / "proposer" / "bench_fixture.jsonl"


def _prepare(root: Path, keep_sft: bool, capsys) -> tuple[int, int, int, int]:
    """Run prepare; return (Coder examples, sft split size, Proposer examples, Proposer sets) from its log."""
    from kernelzero.train.coevolve import freeze_run_config, prepare

    overrides = {
        "run_dir": str(root),
        "warm_start": {"steps": 2},
        "proposer": {
            "warm_start": {"steps": 2},
            "warm_start_variants": 3,
            "admission": {"benchmark_index": str(INDEX)},
        },
        "coevolution": {"coder_warm_keep_sft": keep_sft},
    }
    cfg, _ = freeze_run_config(CONFIG, overrides)
    capsys.readouterr()
    prepare(cfg)
    out = capsys.readouterr().out
    coder = int(re.search(r"\[train coder\] warm start on (\d+) examples", out).group(1))
    proposer = re.search(r"\[train proposer\] warm start on (\d+) template proposals of (\d+) API sets", out)
    sft = len((root / "coder-init" / "tasks" / "sft.jsonl").read_text().splitlines())
    return coder, sft, int(proposer.group(1)), int(proposer.group(2))


def test_variants_and_the_coder_s_templates_beside_its_sft_split(tmp_path, capsys):
    from kernelzero.proposer.generator import write_module
    from kernelzero.train.report import read_jsonl
    from kernelzero.train.template_kernels import template_tasks

    coder, sft, proposer, sets = _prepare(tmp_path / "keep", True, capsys)
    pool = read_jsonl(tmp_path / "keep" / "pool.jsonl")
    apis = [e["apis"] for e in pool if write_module(e["apis"], 0)][0]
    modules = {write_module(apis, seed) for seed in range(3)}
    assert sets == 1 and proposer == len(modules) >= 2  # tiny-cpu warm-starts on one set: its distinct variants
    templates = template_tasks(pool, 1, 3)
    assert len(templates) == len(modules) and sft > 0
    assert coder == sft + len(templates)
    follow = json.loads((tmp_path / "keep" / "proposer-init" / "follow.json").read_text())
    assert sum(follow["seen"].values()) == 1 and follow["unseen"] == {}  # one sampled proposal for the pool's one set
    coder, _, _, _ = _prepare(tmp_path / "replace", False, capsys)
    assert coder == len(templates)  # tiny-cpu's own setting: the templates instead of the sft split


def test_follow_check_splits_seen_and_unseen_sets_and_names_rejections(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.train.coevolve import load_coevolve_config
    from kernelzero.train.proposer_phase import follow_check
    from kernelzero.train.report import read_jsonl

    _prepare(tmp_path, True, capsys)  # two warm-start steps: the policy is still far from the templates
    warm = tmp_path / "proposer-init" / "warm_start"
    tok, model = AutoTokenizer.from_pretrained(warm), AutoModelForCausalLM.from_pretrained(warm)
    cfg = load_coevolve_config(tmp_path / "config.yaml")
    pool = read_jsonl(tmp_path / "pool.jsonl")
    seen = {tuple(pool[0]["apis"])}
    others = [{"apis": ["exp", "relu"]}, {"apis": ["abs", "gelu", "tanh"]}]
    follow = follow_check(model, tok, pool[:1] + others, seen, cfg)
    assert sum(follow["seen"].values()) == 1 and sum(follow["unseen"].values()) == 2
    assert follow["summary"].startswith("seen sets ") and "unseen sets " in follow["summary"]
    rejected = {k: v for part in ("seen", "unseen") for k, v in follow[part].items() if k != "passed"}
    assert all(k in follow["summary"] for k in rejected)  # every rejection reason is named in the log line


def test_keep_sft_without_templates_is_refused(tmp_path):
    from kernelzero.train.coevolve import freeze_run_config

    overrides = {"run_dir": str(tmp_path), "coevolution": {"coder_warm_templates": False, "coder_warm_keep_sft": True}}
    with pytest.raises(ValueError, match="coder_warm_keep_sft: templates off"):
        freeze_run_config(CONFIG, {**overrides, "proposer": {"admission": {"benchmark_index": str(INDEX)}}})


@pytest.mark.parametrize(("every", "floor", "probed_at"), [(1, 0.0, [1]), (2, 1.0, [2, 3])])
def test_the_follow_probe_stops_the_proposer_s_warm_start(tmp_path, every, floor, probed_at):
    """eval_every > 0: the follow check probes the fit; a floor of 0 is met at the first probe, a floor of 1 (every
    seen set followed) by no policy three steps old, which then runs all its steps, probed at 2 and at the last."""
    from kernelzero.train.coevolve import freeze_run_config
    from kernelzero.train.coevolve_pool import write_base_pool
    from kernelzero.train.proposer_phase import prepare_proposer_policy

    warm = {"steps": 3, "eval_every": every, "stop_band": [floor, 1.0]}
    overrides = {
        "run_dir": str(tmp_path),
        "proposer": {"warm_start": warm, "admission": {"benchmark_index": str(INDEX)}},
    }
    cfg, _ = freeze_run_config(CONFIG, overrides)
    write_base_pool(cfg, tmp_path)
    prepare_proposer_policy(cfg, tmp_path)
    history = [json.loads(x) for x in (tmp_path / "proposer-init" / "warm_start.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history if "probe_pass1" in h] == probed_at
    assert len(history) == probed_at[-1]
    assert all(0.0 <= h["probe_pass1"] <= 1.0 for h in history if "probe_pass1" in h)
