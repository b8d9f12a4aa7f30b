"""Config loading of `kernelzero train coder` (clear errors) and the miniature task generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelzero.train.config import load_config
from kernelzero.train.miniature import make_tasks, read_solutions, write_split

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["tiny-cpu", "tiny-gpu", "qwen2.5-coder-7b"])
def test_shipped_configs_load(name):
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    assert cfg.reward.alpha == 0.5 and cfg.reward.beta == 0.1


def test_paper_config_is_lora_7b_with_vllm_checked():
    cfg = load_config(ROOT / "configs" / "qwen2.5-coder-7b.yaml")
    assert cfg.model.path == "Qwen/Qwen2.5-Coder-7B" and cfg.grpo.lora["r"] == 64 and cfg.grpo.steps == 20
    with pytest.raises(ValueError, match="vllm_gpu_memory_utilization"):
        load_config(ROOT / "configs" / "qwen2.5-coder-7b.yaml", {"grpo": {"vllm_gpu_memory_utilization": 1.5}})
    with pytest.raises(ValueError, match="vllm server mode needs url"):
        load_config(ROOT / "configs" / "qwen2.5-coder-7b.yaml", {"grpo": {"use_vllm": True, "vllm_mode": "server"}})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, match",
    [
        ("grpo:\n  stepz: 3\n", r"grpo: unknown key\(s\) \['stepz'\]; valid: \["),
        ("rewards:\n  alpha: 1\n", r"unknown key\(s\) \['rewards'\]"),
        ("grpo:\n  steps: three\n", "grpo.steps must be an integer"),
        ("reward:\n  gate: yes please\n", "reward.gate must be true or false"),
        ("reward:\n  alpha: 1.5\n", "alpha in"),
        ("reward:\n  timed_pass: twice\n", "reward.timed_pass must be one of gated, one_pass"),
        ("tasks:\n  disjoint: api\n", "tasks.disjoint must be one of forward, api_set"),
        ("grpo:\n  group_size: 1\n", "group_size must be >= 2"),
        ("grpo:\n  num_iterations: 0\n", "num_iterations >= 1"),
        ("grpo:\n  num_iterations: 4\n  save_steps: 6\n", "save_steps a multiple of num_iterations"),
        ("grpo:\n  loss_type: ppo\n", "grpo.loss_type must be one of"),
        ("grpo:\n  stop_format_share: 1.0\n", r"stop_format_share must lie in \[0, 1\)"),
        ("verifier:\n  via: http\n", "needs verifier.url"),
        ("verifier:\n  standby: -1\n", "standby >= 0"),
        ("verifier:\n  serves: 0\n", "verifier.serves"),
        ("verifier:\n  per_gpu: 0\n", "per_gpu >= 1"),
        ("verifier:\n  options:\n    profile: strict\n", "CA-GRPO reads 'default'"),
        ("grpo:\n  lora:\n    rank: 8\n", r"lora: unknown key\(s\) \['rank'\]"),
        # the service takes only CLIENT_OPTIONS, within bounds: refused at load, not with a 422 after generation
        (
            "verifier:\n  via: http\n  url: http://x\n  options:\n    compile_check: false\n",
            r"would refuse: verifier.options.compile_check is server configuration",
        ),
        ("verifier:\n  via: http\n  url: http://x\n  options:\n    trials: 50\n", "verifier.options.trials: Input"),
        ("tasks:\n  test_levels: [1, 2]\n", "test_levels filters tasks.test_suite"),
        ("tasks:\n  test_suite: kz-basic\n  test_levels: [4]\n", "KernelBench levels 1, 2, 3"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("grpo: [\n", "not valid YAML"),
    ],
)
def test_bad_configs_name_the_problem(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_config(write(tmp_path, text))


def test_http_verifier_with_client_options_only_loads(tmp_path):
    text = "verifier:\n  via: http\n  url: http://x\n  options:\n    trials: 3\n    policy: strict\n"
    assert load_config(write(tmp_path, text)).verifier.options["trials"] == 3


KERNELBENCH = ROOT.parent / "shared" / "data" / "kernelbench.jsonl"


@pytest.mark.skipif(not KERNELBENCH.exists(), reason="../shared/data/kernelbench.jsonl is absent")
def test_paper_config_evaluates_kernelbench_levels_1_and_2_only(tmp_path):
    from kernelzero.train.coder import prepare_tasks

    cfg = load_config(ROOT / "configs" / "qwen2.5-coder-7b.yaml", {"run_dir": str(tmp_path)})
    assert Path(cfg.tasks.test_suite).resolve() == KERNELBENCH.resolve() and cfg.tasks.test_levels == [1, 2]
    splits, _ = prepare_tasks(cfg, tmp_path)
    assert {t.level for t in splits["test"]} == {1, 2} and len(splits["test"]) == 200  # 100 per level, no Level 3


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")


def test_yaml_exponent_without_dot_is_a_number(tmp_path):
    assert load_config(write(tmp_path, "grpo:\n  lr: 3e-4\n")).grpo.lr == 3e-4


def test_generator_is_deterministic_distinct_and_round_trips(tmp_path):
    a, b = make_tasks(40, seed=3, rows=4, cols=32), make_tasks(40, seed=3, rows=4, cols=32)
    assert a == b
    assert len({(t.steps, t.reduction) for t in a}) == 40
    assert {t.reduction for t in a} == {"", "sum", "mean", "max"}
    path = write_split(a[:5], tmp_path / "s.jsonl")
    assert read_solutions(path) == {f"level1/{t.name}": t.solution for t in a[:5]}
    with pytest.raises(ValueError, match="distinct tasks"):
        make_tasks(500, seed=0, max_steps=1)


def test_held_out_tasks_share_no_api_set_with_training_and_the_run_writes_them(tmp_path):
    """Issue 24 item 1: the held-out split is disjoint from training by forward and by API set (ops and reduction);
    the training splits may share API sets with each other. The miniature config asks for it; the CPU one does not."""
    from kernelzero.train.coder import prepare_tasks
    from kernelzero.train.miniature import api_set, make_splits, tokenizer_code

    sizes = {"test": 30, "rl": 40, "sft": 200}
    splits = make_splits(sizes, seed=5, rows=4, cols=32)
    assert splits == make_splits(sizes, seed=5, rows=4, cols=32) and {k: len(v) for k, v in splits.items()} == sizes
    keys = {name: {api_set(t) for t in tasks} for name, tasks in splits.items()}
    assert not keys["test"] & (keys["rl"] | keys["sft"]) and keys["rl"] & keys["sft"]
    everything = [t for tasks in splits.values() for t in tasks]
    assert len({(t.steps, t.reduction) for t in everything}) == len({t.name for t in everything}) == 270
    assert api_set(everything[0]) == tuple(sorted({op for op, _ in everything[0].steps})) + (
        (everything[0].reduction,) if everything[0].reduction else ()
    )
    assert make_splits({"test": 0, "rl": 5}, seed=1)["test"] == []
    with pytest.raises(ValueError, match="API sets apart"):
        make_splits({"test": 40, "sft": 40}, seed=0, max_steps=1)  # 13 ops x 4 reductions: too few API sets
    with pytest.raises(ValueError, match="name 'test'"):
        make_splits({"rl": 4}, seed=0)

    assert load_config(ROOT / "configs" / "tiny-gpu.yaml").tasks.disjoint == "api_set"
    assert load_config(ROOT / "configs" / "tiny-cpu.yaml").tasks.disjoint == "forward"
    text = "tasks:\n  disjoint: api_set\n  n_sft: 60\n  n_rl: 20\n  n_test: 10\n  rows: 4\n  cols: 32\n"
    cfg = load_config(write(tmp_path, text), {"run_dir": str(tmp_path / "run")})
    written, solutions = prepare_tasks(cfg, tmp_path / "run")
    by_name = {
        t.name: t for tasks in make_splits({"test": 10, "rl": 20, "sft": 60}, rows=4, cols=32).values() for t in tasks
    }
    sets = {name: {api_set(by_name[t.name.split("/")[-1]]) for t in tasks} for name, tasks in written.items()}
    assert not sets["test"] & (sets["rl"] | sets["sft"])
    # the tokenizer's corpus holds no held-out solution
    assert not {solutions[t.name] for t in written["test"]} & set(tokenizer_code(cfg.tasks, written, solutions))


def test_the_grpo_split_can_be_kept_apart_from_the_warm_start_s_api_sets_too(tmp_path):
    """`disjoint: api_set_rl`: no rl task's API set is in the sft split either (2026-12-07: every held-out task with a
    max reduction had its ops in training only with other reductions, and the warm start wrote those; GRPO tasks of
    seen API sets asked nothing of the kind). `api_set` keeps drawing exactly the splits it drew before."""
    import hashlib

    from kernelzero.train.coder import prepare_tasks
    from kernelzero.train.miniature import api_set, make_splits

    sizes = {"test": 30, "rl": 40, "sft": 200}
    splits = make_splits(sizes, seed=5, rows=4, cols=32, apart=("rl",))
    assert {k: len(v) for k, v in splits.items()} == sizes
    keys = {name: {api_set(t) for t in tasks} for name, tasks in splits.items()}
    assert not keys["test"] & (keys["rl"] | keys["sft"]) and not keys["rl"] & keys["sft"]
    before = make_splits(sizes, seed=5, rows=4, cols=32)  # no split apart but the held-out one: as before
    names = json.dumps({k: [t.name for t in v] for k, v in before.items()}).encode()
    assert hashlib.sha256(names).hexdigest()[:16] == "d6050a98634cc001"  # the old make_splits's
    with pytest.raises(ValueError, match="leave no API sets"):
        make_splits({"test": 1, "rl": 95, "sft": 4}, seed=0, apart=("rl",))  # 10% + 95% of the API sets
    with pytest.raises(ValueError, match="name 'test', 'dev'"):
        make_splits({"test": 4, "rl": 4}, seed=0, apart=("dev",))
    text = "tasks:\n  disjoint: api_set_rl\n  n_sft: 60\n  n_rl: 20\n  n_test: 10\n  rows: 4\n  cols: 32\n"
    written, _ = prepare_tasks(load_config(write(tmp_path, text), {"run_dir": str(tmp_path / "run")}), tmp_path / "run")
    by_name = {
        t.name: t
        for v in make_splits({"test": 10, "rl": 20, "sft": 60}, rows=4, cols=32, apart=("rl",)).values()
        for t in v
    }
    sets = {name: {api_set(by_name[t.name.split("/")[-1]]) for t in tasks} for name, tasks in written.items()}
    assert not sets["rl"] & sets["sft"] and not sets["test"] & (sets["rl"] | sets["sft"])


def test_a_split_a_carry_left_behind_is_drawn_again_the_same(tmp_path):
    """bench/miniature_carry.py leaves a file over its size limit on the machine (a 20,000-task sft split): a restore
    elsewhere must not fail on it, nor redraw the splits it kept."""
    from kernelzero.train.coder import prepare_tasks

    text = "tasks:\n  disjoint: api_set\n  n_sft: 60\n  n_rl: 20\n  n_test: 10\n  rows: 4\n  cols: 32\n"
    cfg = load_config(write(tmp_path, text), {"run_dir": str(tmp_path / "run")})
    first, _ = prepare_tasks(cfg, tmp_path / "run")
    folder = tmp_path / "run" / "tasks"
    kept = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.glob("*.jsonl")}
    (folder / "sft.jsonl").unlink()
    again, _ = prepare_tasks(cfg, tmp_path / "run")
    assert again == first and (folder / "sft.jsonl").read_bytes() == kept["sft.jsonl"][0]
    assert {p: (folder / p).stat().st_mtime_ns for p in ("rl.jsonl", "test.jsonl")} == {
        p: kept[p][1] for p in ("rl.jsonl", "test.jsonl")
    }


def test_generated_kernels_pass_the_verifier(tmp_path):
    from kernelzero.service.pool import VerifyRequest, verify_many
    from kernelzero.tasks import load_suite
    from kernelzero.train.miniature import answer_text
    from kernelzero.verify import options_for

    tasks = make_tasks(60, seed=0, rows=3, cols=40)
    # a two-input chain reduced by max over a row that is not a power of two (masked lanes must be -inf)
    picked = [next(t for t in tasks if t.reduction == "max" and t.two_inputs)]
    suite = {t.name: t for t in load_suite(write_split(picked, tmp_path / "p.jsonl")).tasks}
    opts = options_for("default", compile_check=False)
    requests = [VerifyRequest(suite[f"level1/{t.name}"], answer_text(t), "triton", opts, tag=t.name) for t in picked]
    verdicts = {req.tag: v for req, v in verify_many(requests, 2)}
    assert {name: v.status for name, v in verdicts.items()} == {t.name: "correct" for t in picked}
    assert all(v.policy_status.get("strict") == "correct" for v in verdicts.values())


def test_cli_overrides_are_nested_yaml_values():
    from kernelzero.cli.train import parse_overrides

    got = parse_overrides(["grpo.steps=3", "reward.gate=false", "run_dir=/tmp/x", "warm_start.stop_band=[0.1, 0.5]"])
    assert got == {
        "grpo": {"steps": 3},
        "reward": {"gate": False},
        "run_dir": "/tmp/x",
        "warm_start": {"stop_band": [0.1, 0.5]},
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overrides(["grpo.steps"])


def test_accumulation_splits_the_update_not_the_steps_completions(tmp_path):
    """`grpo.gradient_accumulation_steps` keeps prompts x group completions a step and updates them in micro-batches."""
    from kernelzero.train.coder import grpo_args

    over = {"grpo": {"prompts_per_step": 16, "group_size": 8, "gradient_accumulation_steps": 8}}
    args = grpo_args(load_config(ROOT / "configs" / "tiny-cpu.yaml", over), tmp_path, 1)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (16, 8)
    assert args.generation_batch_size == 128 and args.steps_per_generation == 8
    over["grpo"]["gradient_accumulation_steps"] = 3
    with pytest.raises(ValueError, match="128 completions do not split over 1 process"):
        grpo_args(load_config(ROOT / "configs" / "tiny-cpu.yaml", over), tmp_path, 1)


def test_num_iterations_reaches_trl_and_the_miniature_reuses_each_batch(tmp_path):
    """tiny-gpu.yaml updates each verified batch `num_iterations` times: TRL generates every accumulation x mu
    micro-batches and keeps the old log-probabilities the clipped ratio needs."""
    from kernelzero.train.coder import grpo_args

    cfg = load_config(ROOT / "configs" / "tiny-gpu.yaml", {"device": "cpu"})
    args = grpo_args(cfg, tmp_path, 1)
    assert args.num_iterations == cfg.grpo.num_iterations == 4
    assert args.mask_truncated_completions is cfg.grpo.mask_truncated is True and args.beta == cfg.grpo.kl_beta > 0
    assert cfg.grpo.save_steps % cfg.grpo.num_iterations == 0
    assert args.adam_epsilon == 1e-8  # TRL's default unless grpo.adam_epsilon says otherwise
    other = grpo_args(
        load_config(ROOT / "configs" / "tiny-gpu.yaml", {"device": "cpu", "grpo": {"adam_epsilon": 1e-5}}), tmp_path, 1
    )
    assert other.adam_epsilon == 1e-5
    with pytest.raises(ValueError, match="adam_epsilon must be > 0"):
        load_config(ROOT / "configs" / "tiny-gpu.yaml", {"device": "cpu", "grpo": {"adam_epsilon": 0}})
    assert args.gradient_accumulation_steps % (args.steps_per_generation * args.num_iterations) != 0


@pytest.mark.parametrize("disjoint", ["api_set", "forward"])
def test_splits_are_random_samples_of_one_draw_not_its_order(disjoint):
    """A short forward has few distinct variants and runs out early in the draw: splits taken in draw order gave the
    miniature 1 one-step task in 115 to warm-start on, 1 in 7 for GRPO and 1 in 5 held out (2026-12-06)."""
    from kernelzero.train.config import TaskConfig
    from kernelzero.train.miniature import draw_splits

    cfg = TaskConfig(seed=0, rows=4, cols=32, max_steps=4, n_sft=1500, n_rl=256, n_test=128, disjoint=disjoint)
    splits = draw_splits(cfg)
    assert {k: len(v) for k, v in splits.items()} == {"test": 128, "rl": 256, "sft": 1500}
    mean_steps = {k: sum(len(t.steps) for t in v) / len(v) for k, v in splits.items()}
    short = {k: sum(len(t.steps) <= 2 for t in v) / len(v) for k, v in splits.items()}
    assert max(mean_steps.values()) - min(mean_steps.values()) < 0.25, mean_steps
    assert max(short.values()) - min(short.values()) < 0.12, short
    assert draw_splits(cfg) == splits  # seeded


def test_a_resumed_run_may_change_how_long_it_trains_and_when_it_stops_but_not_how(tmp_path):
    """`coder._check_run_json`: a later call of a run may set other `grpo.steps`, `max_minutes` and
    `stop_format_share` (the drift stop added to a run already under way, as on 2026-12-07), not another learning
    rate; a run.json written before a key existed (None there) takes the new key's value too."""
    pytest.importorskip("trl")
    from kernelzero.train import coder

    base = {"run_dir": str(tmp_path)}
    coder._check_run_json(load_config(ROOT / "configs" / "tiny-cpu.yaml", base), tmp_path)
    later = {**base, "grpo": {"steps": 7, "max_minutes": 2.0, "stop_format_share": 0.12}}
    coder._check_run_json(load_config(ROOT / "configs" / "tiny-cpu.yaml", later), tmp_path)
    frozen = json.loads((tmp_path / "run.json").read_text())
    del frozen["config"]["grpo"]["stop_format_share"]
    (tmp_path / "run.json").write_text(json.dumps(frozen))
    coder._check_run_json(load_config(ROOT / "configs" / "tiny-cpu.yaml", later), tmp_path)
    with pytest.raises(ValueError, match=r"other settings \(grpo.lr\)"):
        coder._check_run_json(load_config(ROOT / "configs" / "tiny-cpu.yaml", {**base, "grpo": {"lr": 0.5}}), tmp_path)
