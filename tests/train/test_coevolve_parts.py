"""Parts of the co-evolution loop: the Proposer's reward, the band pool, the round inputs, the state file, the
ablation switches and `kernelzero train --config FILE --dry-run` on every shipped config."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelzero.cli import main
from kernelzero.proposer.dedup import BenchmarkIndex
from kernelzero.proposer.frontier import TaskResult
from kernelzero.proposer.generator import completion_for, write_module
from kernelzero.rewards import frontier_reward
from kernelzero.service.client import Client
from kernelzero.train.coevolve import State, coder_phase_config, freeze_run_config, proposer_trains
from kernelzero.train.coevolve_config import load_coevolve_config
from kernelzero.train.coevolve_pool import band_pool, mix_inputs
from kernelzero.types import Verdict

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
FIXTURE = ROOT / "tests" / "proposer" / "bench_fixture.jsonl"
INDEX = {"proposer": {"admission": {"benchmark_index": str(FIXTURE)}}}  # a clean clone has no ../shared/data
INDEX_SET = ["--set", f"proposer.admission.benchmark_index={FIXTURE}"]


def config(tmp_path: Path, **proposer):
    sets = {"run_dir": str(tmp_path / "run"), "proposer": {"admission": {"benchmark_dedup": False}, **proposer}}
    return load_coevolve_config(ROOT / "configs" / "tiny-cpu.yaml", sets)


def verdict(status: str) -> Verdict:
    return Verdict(status, "t", "h", "c", "triton", "default", "cpu", "done", policy_status={"strict": status})


class FixedCoder:
    """Stands in for the frozen Coder's N tries (the Coder itself is exercised in test_coevolve_cpu.py)."""

    def __init__(self, statuses: list[str]):
        self.statuses = statuses
        self.asked: list[str] = []

    def solve(self, tasks, seed):
        self.asked += [t.name for t in tasks]
        return {t.name: [("```python\n...```", verdict(s)) for s in self.statuses] for t in tasks}, 0.0, 0.0


def test_proposer_reward_gives_rho_to_rejected_and_frontier_reward_to_admitted(tmp_path):
    from kernelzero.train.proposer_reward import ProposerReward

    cfg = config(tmp_path, solve={"samples": 4})
    root = Path(cfg.coder.run_dir)
    coder = FixedCoder(["correct", "mismatch", "mismatch", "timeout"])  # p = 0.25
    seen: list[dict] = []
    reward = ProposerReward(cfg, 1, root, root / "round-1" / "proposer", coder, "test", seen.append)
    reward.collect_step = 1
    good = completion_for(("gelu", "silu"))
    completions = ["```python\ndef broken(:\n```", completion_for(("abs", "exp")), good, good]
    got = reward(prompts=[""] * 4, completions=completions, apis=[["gelu", "silu"]] * 4, origin=["cooccurrence"] * 4)
    assert got == [-1.0, -1.0, frontier_reward(0.25), -1.0]  # syntax error, missing API, admitted, its duplicate
    assert len(coder.asked) == 1  # only the admitted module is solved
    stats = seen[0]["stats"]
    assert stats["reasons"] == {"duplicate": 1, "missing_api": 1, "syntax_error": 1}
    assert stats["admission_rate"] == 0.25 and stats["success_hist"] == {"0.25": 1}
    assert stats["near_duplicate_share"] == 0.25 and stats["distinct_api_sets"] == 1
    records = [json.loads(x) for x in (root / "round-1" / "proposer" / "proposals.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [f"r1s0001i00{i}" for i in range(4)]
    assert {r["benchmark_dedup"] for r in records} == {"off (proposer.admission.benchmark_dedup: false)"}
    assert len((root / "round-1" / "proposer" / "solutions.jsonl").read_text().splitlines()) == 4


def _record(task: str, p: float) -> dict:
    return {"admitted": True, "task": task, "p": p, "reward": frontier_reward(p)}


def test_band_pool_tops_up_with_nearest_admitted_modules_and_never_a_benchmark_task():
    bench = BenchmarkIndex()
    bench.add_suite(FIXTURE)
    benchmark_code = json.loads(FIXTURE.read_text().splitlines()[0])["code"]
    suite = {
        "a": {"name": "a", "code": write_module(("gelu", "silu")), "provenance": {}},
        "b": {"name": "b", "code": write_module(("abs", "exp")), "provenance": {}},
        "c": {"name": "c", "code": write_module(("sigmoid", "tanh")), "provenance": {}},
        "bench": {"name": "bench", "code": benchmark_code, "provenance": {}},
    }
    records = [_record("a", 0.5), _record("b", 0.125), _record("c", 1.0), _record("bench", 0.5)]
    records.append({"admitted": False, "task": "", "p": None, "reward": -1.0})
    two = band_pool(records, suite, (0.25, 0.75), 2, bench)
    assert [r["name"] for r in two] == ["a", "b"]  # b (0.125 from the band) is nearer than c (0.25)
    assert [r["provenance"]["in_band"] for r in two] == [True, False]
    assert two[0]["provenance"]["success_rate"] == 0.5 and two[0]["provenance"]["frontier_reward"] == 1.0
    everything = band_pool(records, suite, (0.25, 0.75), 10, bench)
    assert [r["name"] for r in everything] == ["a", "b", "c"]  # the benchmark task never, even when short
    assert [r["name"] for r in band_pool(records, suite, (0.25, 0.75), 1, None)] == ["a", "bench"]  # no index
    # a round that admitted too little is topped up from earlier rounds, after its own modules
    mixed = band_pool([_record("c", 1.0)], suite, (0.25, 0.75), 2, bench, earlier=records)
    assert [(r["name"], r["provenance"]["in_band"]) for r in mixed] == [("c", False), ("a", False)]


def _result(name: str, p: float, apis: list[str]) -> TaskResult:
    return TaskResult(name, 8, p, frontier_reward(p), apis, [f"mismatch on {name}"], None)


def test_round_inputs_frontier_only_and_mix(tmp_path):
    results = [_result("t1", 0.0, ["gelu", "silu"]), _result("t2", 0.875, ["abs", "exp"])]
    only = config(tmp_path, pool={"inputs": "frontier"})
    rows = mix_inputs(only, results, 2, tmp_path)
    assert [(r["apis"], r["origin"]) for r in rows] == [(["gelu", "silu"], "frontier")]
    assert rows[0]["failure_notes"] == ["mismatch on t1"]
    with pytest.raises(ValueError, match="frontier is empty"):
        mix_inputs(only, [_result("t2", 0.875, ["abs", "exp"])], 2, tmp_path)
    (tmp_path / "catalog.json").write_text(json.dumps(_catalog()))
    mixed = config(tmp_path, pool={"inputs": "mix", "frontier_share": 0.5}, grpo={"steps": 2, "prompts_per_step": 2})
    rows = mix_inputs(mixed, results, 2, tmp_path)
    # 4 = steps x prompts per step; up to half frontier sets (one exists), co-occurrence samples the rest
    assert [r["origin"] for r in rows] == ["frontier", "cooccurrence", "cooccurrence", "cooccurrence"]


def test_frontier_takes_the_coders_failures_from_every_module_it_evaluated(tmp_path):
    from kernelzero.train.coevolve_pool import solved_modules

    one = tmp_path / "round-1" / "proposer"
    one.mkdir(parents=True)
    (tmp_path / "proposer").mkdir()
    names = {"a": ("gelu", "silu"), "b": ("abs", "exp"), "c": ("sigmoid", "tanh")}
    suite = [{"name": n, "code": write_module(apis), "provenance": {"apis": list(apis)}} for n, apis in names.items()]
    (tmp_path / "proposer" / "admitted.jsonl").write_text("".join(json.dumps(r) + "\n" for r in suite))
    records = [{**_record(n, p), "step": 1, "apis": list(names[n])} for n, p in (("a", 0.5), ("b", 0.0), ("c", 0.125))]
    records.append({"admitted": False, "task": "", "p": None, "reward": -1.0, "step": 1, "apis": ["relu", "exp"]})
    (one / "proposals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    tries = [{"step": 1, "task": "b", "correct": False, "status": "mismatch", "message": "max abs diff 3"}] * 2
    (one / "solutions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tries))
    # "a" was in the band pool and is re-evaluated by the frontier eval; b (p = 0) and c (below the band) join
    found = solved_modules(tmp_path, 1, skip={"a"})
    assert [(r.name, r.p, r.n) for r in found] == [("b", 0.0, 2), ("c", 0.125, 0)]
    assert found[0].notes == ["mismatch: max abs diff 3"] * 2
    rows = mix_inputs(
        config(tmp_path, pool={"inputs": "frontier"}), [_result("a", 0.75, ["gelu", "silu"]), *found], 2, tmp_path
    )
    assert [r["apis"] for r in rows] == [["abs", "exp"], ["sigmoid", "tanh"]]  # the p = 0 module first


def _catalog() -> dict:
    from kernelzero.proposer.corpus import build_catalog

    return build_catalog(["kz-basic"])


def test_state_file_records_finished_phases_atomically(tmp_path):
    state = State(tmp_path / "state.json")
    assert state.done("prepare") is None
    state.finish("prepare", coder="c", proposer="p")
    state.finish("round-1/proposer", policy="x")
    again = State(tmp_path / "state.json")
    assert again.done("prepare")["coder"] == "c" and again.done("round-1/proposer")["policy"] == "x"
    assert not (tmp_path / "state.json.tmp").exists()


def test_freeze_switch_and_coder_phase_config(tmp_path):
    never = config(tmp_path)
    frozen = load_coevolve_config(
        ROOT / "configs" / "tiny-cpu.yaml", {**INDEX, "coevolution": {"freeze_proposer_after": 1}}
    )
    start = load_coevolve_config(
        ROOT / "configs" / "tiny-cpu.yaml", {**INDEX, "coevolution": {"freeze_proposer_after": 0}}
    )
    assert [proposer_trains(never, r) for r in (1, 2, 3)] == [True, True, True]
    assert [proposer_trains(frozen, r) for r in (1, 2, 3)] == [True, False, False]
    assert [proposer_trains(start, r) for r in (1, 2)] == [False, False]
    path = coder_phase_config(never, 2, "/ckpt/coder")
    data = json.loads(path.read_text())
    assert data["model"]["path"] == "/ckpt/coder" and data["warm_start"]["steps"] == 0
    assert data["tasks"]["suite"].endswith("round-2/coder_tasks.jsonl") and data["tasks"]["scale"] == 0.0625
    assert data["grpo"]["train_split"] == "rl" and data["run_dir"].endswith("round-2/coder")
    from kernelzero.train.config import load_config

    assert load_config(path).tasks.scale == 0.0625  # `train coder` reads it back


def test_run_folder_refuses_another_configuration(tmp_path):
    sets = {"run_dir": str(tmp_path / "run"), **INDEX}
    freeze_run_config(ROOT / "configs" / "tiny-cpu.yaml", sets)
    freeze_run_config(ROOT / "configs" / "tiny-cpu.yaml", {**sets, "coevolution": {"rounds": 3}})  # more rounds
    other = {**sets, "proposer": {**INDEX["proposer"], "reward": {"rho": -0.5}}}
    with pytest.raises(ValueError, match="another configuration"):
        freeze_run_config(ROOT / "configs" / "tiny-cpu.yaml", other)


@pytest.mark.parametrize(
    "sets, match",
    [
        ({"proposer": {"reward": {"rho": 0.5}}}, "rho must be negative"),
        ({"proposer": {"pool": {"inputs": "both"}}}, "proposer.pool.inputs must be one of"),
        ({"proposer": {"reward": {"band": [0.8, 0.2]}}}, "band must be"),
        ({"proposer": {"solve": {"sampels": 3}}}, r"unknown key\(s\) \['sampels'\]"),
        ({"coevolution": {"rounds": 0}}, "rounds must be >= 1"),
        ({"proposer": {"grpo": {"stop_format_share": 0.2}}}, "stop_format_share: the Coder's drift stop"),
        ({"coevolution": {"coder_warm_start": False}}, "coder_warm_templates: warm start off"),
        ({"proposer": {"admission": {"benchmark_index": "no/such/kernelbench.jsonl"}}}, "benchmark_index: no/such"),
        ({"proposer": {"admission": {"benchmark_index": None}}}, "benchmark_dedup: false to run without"),
        (
            {
                "backend": "cuda",
                "device": "cpu",
                "warm_start": {"steps": 0},
                "reward": {"compiled_counts": True},
                "verifier": {"options": {}},
                **INDEX,
            },
            "co-evolution measures p",
        ),
    ],
)
def test_bad_coevolution_values_name_the_problem(sets, match):
    with pytest.raises(ValueError, match=match):
        load_coevolve_config(ROOT / "configs" / "tiny-cpu.yaml", sets)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A real `kernelzero serve` on localhost (the dry run checks its health endpoint)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    folder = tmp_path_factory.mktemp("serve")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(port), "--db", str(folder / "db.sqlite")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(folder)}
    proc = subprocess.Popen(
        [*argv, "--jobs", "1", "--insecure-no-token"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "kernelzero serve did not start"
            try:
                Client(url).health()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_dry_run_passes_for_every_shipped_config(path, service, capsys):
    assert main(["train", "--config", str(path), "--dry-run", "--set", f"verifier.url={service}", *INDEX_SET]) == 0
    assert "ok" in capsys.readouterr().out


def test_dry_run_fails_clearly_on_a_bad_path_or_an_unreachable_service(tmp_path, capsys):
    seven = str(ROOT / "configs" / "qwen2.5-coder-7b.yaml")
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens there
    assert main(["train", "--config", seven, "--dry-run", "--set", f"verifier.url={closed}", *INDEX_SET]) == 2
    assert "did not answer its health check" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    bad = ["--set", f"proposer.model.path={tmp_path / 'empty'}", "--set", "model.path=./no/such/model"]
    assert main(["train", "--config", str(ROOT / "configs" / "tiny-cpu.yaml"), "--dry-run", *bad, *INDEX_SET]) == 2
    err = capsys.readouterr().err
    assert "holds no config.json" in err and "neither an existing folder nor a hub id" in err
    (tmp_path / "empty.jsonl").write_text("")
    index = ["--set", f"proposer.admission.benchmark_index={tmp_path / 'empty.jsonl'}"]
    assert main(["train", "--config", str(ROOT / "configs" / "tiny-cpu.yaml"), "--dry-run", *index]) == 2
    assert "benchmark_index" in capsys.readouterr().err


def _metrics(folder: Path, pass1: float) -> None:
    folder.mkdir(parents=True)
    overall = {"pass@k": {"1": pass1, "5": pass1 + 0.1, "10": pass1 + 0.2}, "fast_p": {"1": 0.05}}
    (folder / "metrics.json").write_text(json.dumps({"overall": overall}))


def test_report_has_a_row_per_round_for_each_model(tmp_path):
    from kernelzero.train.coevolve_report import write_coevolve_report

    one = tmp_path / "round-1"
    (one / "proposer").mkdir(parents=True)
    records = [_record("a", 0.5), _record("b", 0.125), {"admitted": False, "task": "", "p": None, "reward": -1.0}]
    records[2]["reason"] = "missing_api"
    (one / "proposer" / "proposals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (one / "coder_tasks.jsonl").write_text('{"name": "a", "provenance": {"in_band": true}}\n')
    _metrics(one / "coder" / "eval" / "warm", 0.25)
    _metrics(one / "coder" / "eval" / "step-20", 0.375)
    (tmp_path / "round-2").mkdir()
    (tmp_path / "round-2" / "coder_tasks.jsonl").write_text((one / "coder_tasks.jsonl").read_text())
    text = write_coevolve_report(tmp_path).read_text()
    assert "| 1 | 0.250 | 0.375 | 0.475 | 0.575 | 0.050 | n/a |" in text  # no coder.yaml: nothing to compare
    # (1 + 0.25 - 1) / 3, and the rewards' values: Frontier Rewards 1 and 0.25 beside a rejection's -1
    assert "| 1 | 3 | 0.667 | 0.083 | -1: 1, 0.25: 1, 1: 1 | 0.12: 1, 0.50: 1 | 1 (0) | missing_api 1 |" in text
    assert "| 2 | frozen (earlier pool) |" in text


def test_report_says_how_far_the_coder_phase_moved_the_weights(tmp_path):
    import torch
    from safetensors.torch import save_file

    from kernelzero.train.coevolve_report import weight_change, write_coevolve_report

    start, end = tmp_path / "coder-init", tmp_path / "round-1" / "coder" / "policy"
    for folder in (start, end):
        folder.mkdir(parents=True)
    weights = {"a": torch.ones(4), "b": torch.zeros(3)}
    save_file(weights, str(start / "model.safetensors"))
    save_file({"a": torch.ones(4), "b": torch.zeros(3)}, str(end / "model.safetensors"))
    assert weight_change(start, end) == {"relative_l2": 0.0, "changed": 0, "tensors": 2}  # bit-identical
    save_file({"a": torch.tensor([1.0, 1.0, 1.0, 3.0]), "b": torch.zeros(3)}, str(end / "model.safetensors"))
    got = weight_change(start, end)
    assert (got["changed"], got["tensors"]) == (1, 2) and got["relative_l2"] == pytest.approx(1.0)  # |(0,0,0,2)| / 2
    assert weight_change(start, tmp_path / "missing") is None
    (tmp_path / "round-1" / "coder.yaml").write_text(json.dumps({"model": {"path": str(start)}}))
    text = write_coevolve_report(tmp_path).read_text()
    assert "| 1 | n/a | n/a | n/a | n/a | n/a | 1.00e+00 (1 of 2 tensors) | n/a |" in text
    steps = [  # two generated batches, one with a group with signal; the other's two updates were held
        {"step": 1, "samples": 4, "groups_with_signal": 0},
        {"step": 2, "held": True},
        {"step": 3, "samples": 4, "groups_with_signal": 1},
        {"step": 4},
    ]
    (end.parent / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in steps))
    text = write_coevolve_report(tmp_path).read_text()
    assert "| 1.00e+00 (1 of 2 tensors) | 1 of 2 (1) |" in text


def test_proposer_step_counts_groups_whose_rewards_differ():
    from kernelzero.train.proposer_reward import step_stats

    def rec(reward, admitted=False):
        return {"admitted": admitted, "reward": reward, "p": 0.5 if admitted else None, "reason": "", "apis": ["a"]}

    records = [rec(-1.0), rec(-1.0), rec(-1.0), rec(1.0, True), rec(None, True), rec(0.5, True)]
    assert step_stats(records, group_size=2)["groups_with_signal"] == 1  # (-1, -1) none, (-1, 1) one, (None, .5) none
    assert step_stats(records, group_size=3)["groups_with_signal"] == 1
    assert "groups_with_signal" not in step_stats(records)  # no group size: not known
