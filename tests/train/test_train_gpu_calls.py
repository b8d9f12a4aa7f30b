"""bench/train_gpu.py's miniature calls may come in any order: each says first what state it needs and whether it
found it, and a later call without call 1's state stops at once (no warm start redone, no crash at the end)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def call(run: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "train_gpu.py"), "miniature", "--run", str(run), "--out", str(out)]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_call_2_without_call_1_state_stops_at_once_saying_what_is_missing(tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    done = call(run, out, "--call", "2", "--set", "grpo.lr=5e-5")
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
    assert state["set"] == ["grpo.lr=5e-5"]  # the overrides the call ran with, on record


def test_call_3_finds_call_1_state(tmp_path):
    train_gpu = _train_gpu()
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


def _bench(name: str):
    """The bench/ module `name` (bench/ is a folder of scripts, not a package)."""
    import importlib

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


def _train_gpu():
    return _bench("train_gpu")


def test_a_later_call_with_the_warm_start_but_no_curve_goes_on_and_takes_the_point_first(tmp_path):
    train_gpu = _train_gpu()
    run = tmp_path / "run"
    (run / "warm_start").mkdir(parents=True)
    (run / "warm_start" / "config.json").write_text("{}")
    args = train_gpu.argparse.Namespace(call=2, run=str(run), out=str(tmp_path / "out"), from_scratch=False)
    assert train_gpu.miniature_state(args)


def test_a_pass1_point_that_would_outrun_the_call_is_skipped_saying_why(tmp_path, capsys):
    """2026-12-03: call 1's held-out point (256 samples at about 2.2 s each) ran past the device call's limit and
    the call's state was lost. The point's cost comes from the probes' rates per sample (`point_estimate`)."""

    train_gpu = _train_gpu()
    run = tmp_path / "run"
    run.mkdir()
    samples = 4 * 64  # eval.samples x the held-out split
    args = train_gpu.argparse.Namespace(call=1, budget_s=540.0)
    assert train_gpu.point_estimate(run, 256) is None
    assert train_gpu._point_fits(args, samples, run, "warm start")  # nothing measured yet: it tries
    with (run / "probe_times.jsonl").open("a") as f:
        f.write(json.dumps({"label": "warm-start probe", "samples": 64, "generate_s": 4.0, "verify_s": 60.0}) + "\n")
    assert train_gpu.point_estimate(run, 256) == 256.0
    train_gpu.STARTED = train_gpu.time.monotonic() - 400  # 140 s left of 540
    assert not train_gpu._point_fits(args, samples, run, "warm start")
    said = capsys.readouterr().out
    assert "SKIPPED the pass@1 point 'warm start': 256 samples need about 256 s" in said
    assert "the next call takes the warm-start point first" in said
    assert not train_gpu._point_fits(args, samples, run, "GRPO call 1")
    assert "the next call's point measures it" in capsys.readouterr().out
    with (run / "probe_times.jsonl").open("a") as f:  # the measured rate of 2026-12-03 twice: no call can hold it
        for _ in "ab":
            f.write(
                json.dumps({"label": "warm-start probe", "samples": 64, "generate_s": 4.0, "verify_s": 141.0}) + "\n"
            )
    train_gpu.STARTED = train_gpu.time.monotonic()
    assert not train_gpu._point_fits(args, samples, run, "warm start")
    assert "more than a whole call's 480 s" in capsys.readouterr().out
    samples = 4 * 16  # 64 samples: about 145 s, fits
    assert train_gpu._point_fits(args, samples, run, "warm start")


def test_the_report_compares_each_point_with_the_warm_start_pairwise_and_says_whether_item_1_holds():
    """Issue 24 item 1: held-out pass@1 up by at least 10 points and beyond its 95% interval, tasks as the unit."""
    report = _bench("miniature_report")
    tasks = [f"t{i}" for i in range(64)]
    warm = {t: 0.25 * (i % 2) for i, t in enumerate(tasks)}  # pass@1 0.125
    small = {t: p + (0.25 if i < 16 else 0.0) for i, (t, p) in enumerate(warm.items())}  # +0.0625
    large = {t: p + (0.5 if i < 24 else 0.0) for i, (t, p) in enumerate(warm.items())}  # +0.1875
    noise = {t: p + (0.5 if i % 8 == 0 else -0.25 if i % 8 == 1 else 0.0) for i, (t, p) in enumerate(warm.items())}
    curve = [
        {"label": "warm start", "step": 0, "per_task": warm},
        {"label": "old point", "step": 2},  # written before per_task was kept: left out
        {"label": "GRPO call 1", "step": 4, "per_task": small},
        {"label": "GRPO call 2", "step": 8, "per_task": large},
        {"label": "GRPO call 3", "step": 12, "per_task": noise},
    ]
    rows = {r["label"]: r for r in report.item1_gains(curve)}
    assert list(rows) == ["GRPO call 1", "GRPO call 2", "GRPO call 3"]
    assert rows["GRPO call 1"]["gain"] == 0.0625 and rows["GRPO call 1"]["ci"][0] > 0
    assert not rows["GRPO call 1"]["item1_met"]  # beyond its interval, but under 10 points
    assert rows["GRPO call 2"]["gain"] == 0.1875 and rows["GRPO call 2"]["item1_met"]
    assert rows["GRPO call 3"]["ci"][0] <= 0 and not rows["GRPO call 3"]["item1_met"]
    assert report.item1_gains(curve[1:]) == []  # no warm-start point, nothing to compare with


def test_the_sampling_gap_pairs_each_sampled_point_with_its_own_greedy_twin_only():
    """The gap (greedy minus sampled pass@1) is what sharpening could still win: 2026-12-07's three warm starts had
    0.086, 0.035 and 0.004. A point pairs with the twin of its own label, the latest if measured again; a point
    without a twin, a twin without its point, and a greedy row are no rows of their own."""
    report = _bench("miniature_report")
    curve = [
        {"label": "warm start", "step": 0, "pass1": 0.148},
        {"label": "warm start greedy", "step": 0, "pass1": 0.2, "greedy": True},
        {"label": "warm start greedy", "step": 0, "pass1": 0.234, "greedy": True},  # measured again: the latest
        {"label": "GRPO call 2", "step": 20, "pass1": 0.25},  # no twin (it did not fit)
        {"label": "GRPO call 3", "step": 28, "pass1": 0.3},
        {"label": "GRPO call 3 greedy", "step": 28, "pass1": 0.28, "greedy": True},  # greedy below sampled
        {"label": "lost greedy", "step": 30, "pass1": 0.5, "greedy": True},  # its sampled point is missing
        {"label": "GRPO call 3 greedy", "step": 28, "pass1": None},  # not marked greedy: a sampled point, no twin
    ]
    rows = report.sampling_gaps(curve)
    assert [(r["label"], r["sampled"], r["greedy"], r["gap"]) for r in rows] == [
        ("warm start", 0.148, 0.234, 0.086),
        ("GRPO call 3", 0.3, 0.28, -0.02),
    ]


def test_a_point_is_estimated_from_the_probes_of_its_size_at_their_median_rate_or_one_and_a_half_the_latest(tmp_path):
    """2026-12-07 (H100): a call's first point on a fresh machine took 217 s, the next 121 s (the latest alone held
    back 96 s too many); later that day the rate fell with each point (0.57, 0.31, 0.27 s a sample) as the verdict
    cache filled, and the median with the warm start's small probe held back 116 s more than the point took. A row
    of no samples is no rate; the small probe counts only before a point of the size asked for has run."""
    train_gpu = _train_gpu()
    run = tmp_path / "run"
    run.mkdir()

    def probe(generate_s: float, verify_s: float, samples: int = 256) -> None:
        with (run / "probe_times.jsonl").open("a") as f:
            f.write(json.dumps({"label": "p", "samples": samples, "generate_s": generate_s, "verify_s": verify_s}))
            f.write("\n")

    assert train_gpu.point_estimate(run, 256) is None
    probe(4.7, 57.3, samples=64)  # the warm start's probe: 0.969 s a sample
    assert abs(train_gpu.point_estimate(run, 256) - 248.0) < 0.1
    probe(26.8, 118.0)  # the warm-start point, 0.566 s a sample: the small probe no longer counts
    assert abs(train_gpu.point_estimate(run, 256) - 144.8) < 0.1
    probe(24.7, 55.1)  # 0.312: the median of two (0.439) is under 1.5 x the latest (0.468)
    assert abs(train_gpu.point_estimate(run, 256) - 0.5 * (144.8 + 79.8)) < 0.1
    probe(25.9, 44.4)  # 0.275: the median of three, 0.312
    assert abs(train_gpu.point_estimate(run, 256) - 79.8) < 0.1
    probe(10.0, 10.0)  # 0.078: 1.5 x the latest (30 s) is under the median (0.275, 70.3 s)
    probe(0.0, 0.0, samples=0)
    assert abs(train_gpu.point_estimate(run, 256) - 30.0) < 0.1
    assert abs(train_gpu.point_estimate(run, 64) - 62.0) < 0.1  # the small probe's own size: its own rate


def test_a_grpo_batch_is_estimated_at_the_run_s_longest(tmp_path):
    """The first batch of a call is its slowest (its judges start cold): a call starts GRPO only if the longest batch
    so far fits, 90 s before any batch ran (H100, 2026-12-07: first batches 73-85 s)."""
    train_gpu = _train_gpu()
    run = tmp_path / "run"
    run.mkdir()
    assert train_gpu.batch_estimate(run) == 90.0
    rows = [(1, 1, 80.1), (2, 1, 1.8), (3, 1, 1.8), (4, 1, 1.8), (5, 5, 55.0), (6, 5, 1.7)]
    with (run / "steps.jsonl").open("w") as f:
        for step, batch, took in rows:
            f.write(json.dumps({"step": step, "batch_step": batch, "time_step_s": took}) + "\n")
    assert abs(train_gpu.batch_estimate(run) - 85.5) < 1e-6


def test_a_call_learns_from_the_step_log_whether_the_drift_stop_ended_its_grpo(tmp_path):
    """`drift_stop(run, step)`: the reason on the line of the step that generated the batch GRPO ended on (then a
    --no-point call takes its point after all: its GRPO time is unspent); '' for any other batch's last step."""
    train_gpu = _train_gpu()
    run = tmp_path / "run"
    run.mkdir()
    assert train_gpu.drift_stop(run, 4) == ""  # no steps.jsonl yet
    why = "format_error above 0.12 of two batches in a row (0.219 of this one)"
    rows = [{"step": 1, "batch_step": 1}, {"step": 2, "batch_step": 1}, {"step": 3, "batch_step": 3, "stopped": why}]
    rows += [{"step": 4, "batch_step": 3}, {"step": 5, "batch_step": 5}, {"step": 6, "batch_step": 5}]
    (run / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [train_gpu.drift_stop(run, step) for step in (2, 3, 4, 6, 9)] == ["", why, why, "", ""]


def test_no_point_gives_the_point_s_time_to_grpo():
    """--no-point (a middle call): the pass@1 point's estimated seconds go to GRPO steps; the saves' stay reserved."""
    train_gpu = _train_gpu()
    args = train_gpu.argparse.Namespace(call=2, budget_s=540.0, no_point=False)
    train_gpu.STARTED = train_gpu.time.monotonic() - 40  # 500 s left
    with_point = train_gpu.grpo_minutes(args, 194.0)
    assert 4.5 < with_point < 4.55  # (500 - 194 - 15 - 20) / 60
    args.carry_out = True  # one carry out before the point and one at the end, 10 s each
    assert abs(train_gpu.grpo_minutes(args, 194.0) - (with_point - 20.0 / 60)) < 0.01
    args.no_point = True
    assert abs(train_gpu.grpo_minutes(args, 194.0) - (with_point + (194.0 - 10.0) / 60)) < 0.01
    args.carry_out = False
    args.no_point = True
    assert abs(train_gpu.grpo_minutes(args, 194.0) - with_point - 194.0 / 60) < 0.01
    assert abs(train_gpu.grpo_minutes(args, None) - train_gpu.grpo_minutes(args, 194.0)) < 0.01
    # a call whose warm-start point did not fit runs its GRPO without a point after it, as --no-point would
    args.no_point = False
    assert abs(train_gpu.grpo_minutes(args, 194.0, no_point=True) - train_gpu.grpo_minutes(args, 9.0, True)) < 0.01
    assert abs(train_gpu.grpo_minutes(args, 194.0, no_point=True) - with_point - 194.0 / 60) < 0.01


def test_grpo_runs_only_where_a_batch_fits_and_without_its_point_where_only_that_fits(capsys):
    """2026-12-07 (H100): call 1 had about 160 s left after its warm-start point and ran no GRPO, the point after it
    being estimated at 196 s. Now: a batch that fits only without the point runs without it, saying so; none where
    not even that fits; with room for both, both."""
    train_gpu = _train_gpu()
    args = train_gpu.argparse.Namespace(call=1, budget_s=540.0, no_point=False, carry_out=True)
    train_gpu.STARTED = train_gpu.time.monotonic() - (540 - 160)  # 160 s left: 125 s without a point, 0 with one
    minutes, no_point = train_gpu.grpo_plan(args, 196.0, 90.0, False)
    assert no_point and abs(minutes * 60 - (160 - 15 - 10 - 20)) < 1.0
    assert "fits only without a pass@1 point" in capsys.readouterr().out
    assert train_gpu.grpo_plan(args, 196.0, 130.0, False) == (0.0, False)  # a 130 s batch does not fit even so
    assert "no GRPO in this call: a batch takes about 130 s, 0 s are left" in capsys.readouterr().out
    train_gpu.STARTED = train_gpu.time.monotonic() - 40  # 500 s left: 280 s with a 196 s point
    minutes, no_point = train_gpu.grpo_plan(args, 196.0, 90.0, False)
    assert not no_point and abs(minutes * 60 - (500 - 196 - 15 - 20 - 20)) < 1.0
    assert train_gpu.grpo_plan(args, 196.0, 90.0, True)[1]  # --no-point stays so


def _tiny_run(tmp_path: Path, max_tokens: int = 8):
    """A random tiny policy saved as a run's warm start, two miniature tasks and a CPU config: (config, run, tasks)."""
    from kernelzero.train.config import ModelConfig, load_config
    from kernelzero.train.miniature import make_tasks
    from kernelzero.train.tiny import build_model, build_tokenizer, save_policy
    from kernelzero.types import Task

    run = tmp_path / "run"
    minis = make_tasks(2, seed=0, rows=2, cols=8, max_steps=1)
    tok = build_tokenizer([m.source + m.solution for m in minis] * 4, vocab_size=320)
    model = build_model(ModelConfig(vocab_size=320, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    save_policy(model, tok, run / "warm_start")
    over = {"run_dir": str(run), "device": "cpu", "eval": {"samples": 2, "max_tokens": max_tokens, "batch_size": 4}}
    cfg = load_config(ROOT / "configs" / "tiny-cpu.yaml", over)
    return cfg, run, [Task(name=m.name, source=m.source) for m in minis]


def test_a_pass1_point_keeps_its_samples_beside_the_curve(tmp_path):
    """Each point appends its 4 x 64 samples (task, status, text) to points.jsonl.gz, so a flat curve can be read
    sample by sample afterwards; the curve's line itself stays small. Real CPU verification of a tiny policy."""
    import gzip

    train_gpu = _train_gpu()
    cfg, run, tasks = _tiny_run(tmp_path)
    # the policy samples as TRL's GRPO does: no top-k cut (transformers' default would keep the 50 likeliest tokens)
    assert json.loads((run / "warm_start" / "generation_config.json").read_text())["top_k"] == 0
    point = train_gpu._probe_point(cfg, run, {"test": tasks}, "warm start", 0)
    assert "completions" not in point and point["tasks"] == 2
    with gzip.open(run / "points.jsonl.gz", "rt") as f:
        kept = [json.loads(line) for line in f]
    assert [(k["label"], k["step"], k["task"]) for k in kept] == [
        ("warm start", 0, t.name) for t in tasks for _ in "ab"
    ]
    assert sum(point["statuses"].values()) == 4 and {k["status"] for k in kept} <= set(point["statuses"])
    assert json.loads((run / "curve.jsonl").read_text())["label"] == "warm start"


def test_greedy_points_add_a_greedy_twin_to_each_point_that_item_1_leaves_out(tmp_path):
    """--greedy-points: after a point (2 samples a task at the eval temperature) its twin, one greedy sample a task,
    labelled "<label> greedy" and marked greedy: the same text whatever the point's seed (greedy decoding). Without
    the flag no twin. Item 1 reads the sampled points only; the greedy ones are compared with the warm start's twin.
    Real CPU verification of a tiny random policy (32 new tokens: a random model's samples all differ)."""
    import gzip

    train_gpu = _train_gpu()
    cfg, run, tasks = _tiny_run(tmp_path, max_tokens=32)
    args = train_gpu.argparse.Namespace(greedy_points=False, budget_s=1e6, call=1)
    train_gpu._points(args, cfg, run, {"test": tasks}, "warm start", 0)
    assert [p["label"] for p in train_gpu.read_jsonl(run / "curve.jsonl")] == ["warm start"]
    args.greedy_points = True
    train_gpu._points(args, cfg, run, {"test": tasks}, "GRPO call 2", 7)
    train_gpu._probe_point(cfg, run, {"test": tasks}, "again greedy", 9, greedy=True)
    curve = train_gpu.read_jsonl(run / "curve.jsonl")
    assert [(p["label"], p["samples"], p.get("greedy", False)) for p in curve] == [
        ("warm start", 2, False),
        ("GRPO call 2", 2, False),
        ("GRPO call 2 greedy", 1, True),
        ("again greedy", 1, True),
    ]
    assert [r["samples"] for r in train_gpu.read_jsonl(run / "probe_times.jsonl")] == [4, 4, 2, 2]
    with gzip.open(run / "points.jsonl.gz", "rt") as f:
        kept = [json.loads(line) for line in f]
    texts = {label: [k["text"] for k in kept if k["label"] == label] for label in ("GRPO call 2", "again greedy")}
    assert texts["again greedy"] == [k["text"] for k in kept if k["label"] == "GRPO call 2 greedy"]  # seeds 7 and 9
    assert len(set(texts["GRPO call 2"])) > 1  # the sampled point's texts differ: the greedy twin is not sampling
    report = _bench("miniature_report")
    assert [g["label"] for g in report.item1_gains(curve)] == ["GRPO call 2"]
    assert report.item1_gains(curve, greedy=True) == []  # no greedy twin of the warm start to compare with
    assert [(g["label"], g["greedy"]) for g in report.sampling_gaps(curve)] == [("GRPO call 2", curve[2]["pass1"])]
    curve[2]["label"] = "warm start greedy"
    rows = report.item1_gains(curve, greedy=True)
    assert [g["label"] for g in rows] == ["again greedy"] and not rows[0]["item1_met"]


def test_set_overrides_the_miniatures_config_and_a_wrong_key_is_refused(tmp_path):
    train_gpu = _train_gpu()
    args = train_gpu.argparse.Namespace(
        config=str(ROOT / "configs" / "tiny-gpu.yaml"),
        run=str(tmp_path / "run"),
        seed=1,
        set=["grpo.lr=5e-5", "grpo.num_iterations=1", "verifier.per_gpu=12", "model.layers=4"],
    )
    cfg = train_gpu.miniature_config(args)
    assert (cfg.grpo.lr, cfg.grpo.num_iterations, cfg.verifier.per_gpu) == (5e-5, 1, 12)
    assert (cfg.model.layers, cfg.model.seed, cfg.seed, cfg.run_dir) == (4, 1, 1, str(tmp_path / "run"))
    args.set = []
    base = train_gpu.miniature_config(args)
    assert (base.grpo.lr, base.grpo.num_iterations, base.model.layers) == (2e-5, 4, 8)
    args.set = ["grpo.no_such_key=1"]
    with pytest.raises(ValueError, match="no_such_key"):
        train_gpu.miniature_config(args)


def test_a_call_carries_its_steps_out_before_its_point_and_a_fresh_machine_takes_them_in(tmp_path):
    """Calls 1 and 2 of configs/tiny-cpu.yaml for real on CPU, call 2 in another run folder (a fresh machine) from
    call 1's carry. Call 2 carries its state out before its pass@1 point, not only at its end: a point cut by the
    device call's limit then loses only itself (2026-12-03 a cut point lost a whole call)."""
    run1, out1, run2, out2 = (tmp_path / n for n in ("run1", "out1", "run2", "out2"))
    common = ["--config", str(ROOT / "configs" / "tiny-cpu.yaml"), "--budget-s", "300", "--carry-out"]
    for small in ("warm_start.steps=10", "grpo.steps=1", "grpo.max_completion_length=48", "eval.max_tokens=48"):
        common += ["--set", small]  # no learning asked for here: short samples and few steps
    first = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "train_gpu.py"), "miniature", "--run", str(run1), "--out", str(out1)]
        + ["--call", "1", *common],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert (out1 / "state.tar.gz").exists()
    second = call(run2, out2, "--call", "2", "--carry-in", str(out1), *common)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    lines = second.stdout.splitlines()
    assert any(line.startswith("[carry] in: step") for line in lines)
    carried = [i for i, line in enumerate(lines) if line.startswith("[carry] out: step")]
    point = [i for i, line in enumerate(lines) if line.startswith('{"label": "GRPO call 2"')]
    assert len(point) == 1 and len(carried) == 2 and carried[0] < point[0] < carried[1], second.stdout[-3000:]
    # the second carry replaced the first and kept it whole: the tarball, its parts, this call's state record
    import tarfile

    with tarfile.open(out2 / "state.tar.gz") as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("carry.json"))
    assert "report/miniature_state_call2.json" in names and "run/curve.jsonl" in names
    assert all((out2 / p["name"]).exists() for p in manifest["parts"])
    curve = [json.loads(line) for line in (run2 / "curve.jsonl").read_text().splitlines()]
    assert [p["label"] for p in curve] == ["warm start", "GRPO call 1", "GRPO call 2"]  # call 1's points came in
