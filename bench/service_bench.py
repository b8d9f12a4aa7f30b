"""Benchmarks of the verification pool (issue 6/7): build times, throughput, GPU health after a crash.

    python3 bench/service_bench.py builds --baseline 2 --fast 5         # cold load_inline vs the build recipe
    python3 bench/service_bench.py throughput --seconds 300 --gpus 1    # mixed CUDA + Triton stream
    python3 bench/service_bench.py probe                                # crash, then the next sample probes
    python3 bench/service_bench.py stages [FIXTURE ...]                 # one sample's stages, IPC on and off
    (add --json FILE to keep the numbers; run from the repo root with PYTHONPATH=src on a GPU machine)

Candidates are the hand-written fixtures in tests/kernels/correct (4 CUDA, 8 Triton) on kz-basic tasks
at their bench sizes. Every CUDA sample is made distinct by a `// variant N` line at the top of its CUDA
source, so every build is a cold build of a source never seen before (caches start empty: a fresh
build cache and fresh worker Triton caches); Triton samples differ by a comment line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "verify"))

from fixtures import load_fixtures  # noqa: E402
from lease_overlaps import overlaps  # noqa: E402


def variant(source: str, backend: str, i: int) -> str:
    if backend == "cuda":
        return source.replace('r"""', f'r"""\n// variant {i}', 1)
    return f"# variant {i}\n{source}"


def correct_fixtures(backend: str | None = None):
    return [f for f in load_fixtures() if f.path.parent.name == "correct" and (backend is None or f.backend == backend)]


# ------------------------------------------------------------------------------------------- builds


def _distinct(build, tag: str):
    """The build with a comment line leading its first CUDA source: a source no cache has seen."""
    from dataclasses import replace

    return replace(build, cuda_sources=(f"// {tag}\n" + build.cuda_sources[0], *build.cuda_sources[1:]))


def bench_builds(args) -> dict:
    import torch.utils.cpp_extension as ce

    from kernelzero.verify.backends.cuda.build import build_extension, toolchain
    from kernelzero.verify.backends.cuda.build_cache import BuildCache
    from kernelzero.verify.backends.cuda.capture import capture_load_inline

    builds = []
    for fx in correct_fixtures("cuda"):
        (b,) = capture_load_inline(str(fx.path), 120)
        builds.append((fx.path.stem, b))
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="kz-buildbench-"))

    def record(row: dict) -> None:
        rows.append(row)
        print(row, flush=True)

    for i in range(args.baseline):
        name, b = builds[i % len(builds)]
        b = _distinct(b, f"baseline variant {i}")
        folder = work / f"base{i}"
        folder.mkdir(parents=True)
        start = time.perf_counter()
        ce.load_inline(
            b.name + f"_base{i}",
            list(b.cpp_sources),
            list(b.cuda_sources),
            functions=list(b.functions or []) or None,
            extra_cflags=list(b.extra_cflags),
            extra_cuda_cflags=list(b.extra_cuda_cflags),
            build_directory=str(folder),
        )
        record({"recipe": "torch load_inline", "candidate": name, "total": round(time.perf_counter() - start, 2)})
    cache = BuildCache(work / "cache")
    tools = toolchain()
    # one-time: the precompiled header (made by the first build that needs it, reported separately)
    warm = build_extension(_distinct(builds[0][1], "pch warm-up"), cache, tools=tools)
    one_time = {"pch_s": warm.seconds.get("pch"), "first_build_s": warm.seconds.get("total")}
    print("one-time", one_time, flush=True)
    recipes = [
        ("kernelzero (split)", {}, args.fast),
        ("kernelzero, no split", {"split": False}, args.fast_nosplit),
        ("kernelzero, no split/pch/light", {"use_pch": False, "light_headers": False, "split": False}, args.fast_plain),
    ]
    for recipe, flags, count in recipes:
        for i in range(count):
            name, b = builds[i % len(builds)]
            r = build_extension(_distinct(b, f"{recipe} variant {i}"), cache, tools=tools, **flags)
            record({"recipe": recipe, "candidate": name, "ok": r.ok, **r.seconds, "transforms": "+".join(r.transforms)})
    summary = {}
    for recipe in sorted({r["recipe"] for r in rows}):
        totals = [r["total"] for r in rows if r["recipe"] == recipe]
        summary[recipe] = {"n": len(totals), "median_s": round(statistics.median(totals), 2), "max_s": max(totals)}
    return {"rows": rows, "one_time": one_time, "summary": summary}


# ------------------------------------------------------------------------------------------- throughput


_live_stats = None


def requests(seconds: float, cuda_share: float, opts):
    from kernelzero.service.pool import VerifyRequest

    cuda, triton = correct_fixtures("cuda"), correct_fixtures("triton")
    tasks = {f.task_key: f.task() for f in cuda + triton}
    deadline = time.monotonic() + seconds
    n_cuda = n_triton = 0
    for i in itertools.count():
        if time.monotonic() > deadline:
            return
        use_cuda = n_cuda < cuda_share * (n_cuda + n_triton + 1)
        fx = cuda[n_cuda % len(cuda)] if use_cuda else triton[n_triton % len(triton)]
        n_cuda, n_triton = n_cuda + use_cuda, n_triton + (not use_cuda)
        yield VerifyRequest(
            tasks[fx.task_key],
            variant(fx.source, fx.backend, i),
            fx.backend,
            fx.verify_options(**opts),
            tag=(fx.name, i),
        )


def bench_throughput(args) -> dict:
    from kernelzero.service.pool import PoolStats, verify_many

    cache = tempfile.mkdtemp(prefix="kz-builds-", dir="/var/tmp" if os.geteuid() == 0 else None)
    baselines = tempfile.mkdtemp(prefix="kz-baselines-")
    opts = {"baselines_dir": baselines}
    global _live_stats
    stats = _live_stats = PoolStats()
    statuses: dict[str, int] = {}
    per_backend: dict[str, list[float]] = {"cuda": [], "triton": []}
    gpus = list(range(args.gpus))
    timings: dict[str, dict[int, list[float]]] = {}
    stages: dict[str, list[float]] = {}
    leases: dict[str, list[tuple[float, float]]] = {}
    cpu_before = _cpu_times()
    for req, verdict in verify_many(
        requests(args.seconds, args.cuda_share, opts),
        store=None,
        gpus=gpus,
        per_gpu=args.per_gpu,
        build_jobs=args.build_jobs,
        build_cache=cache,
        stats=stats,
    ):
        statuses[verdict.status] = statuses.get(verdict.status, 0) + 1
        per_backend[req.backend].append(verdict.stage_seconds.get("total", 0.0))
        for stage, sec in verdict.stage_seconds.items():
            if not stage.endswith("_at"):
                stages.setdefault(f"{req.backend}:{stage}", []).append(sec)
        st = verdict.stage_seconds
        if "gpu_lease_at" in st:
            excl = (st["gpu_excl_at"], st["gpu_excl_at"] + st.get("gpu_excl", 0.0)) if "gpu_excl_at" in st else None
            shared = (st["gpu_lease_at"], st["gpu_lease_at"] + st.get("gpu_shared", st.get("gpu_lease", 0.0)))
            leases.setdefault(_gpu_of(verdict), []).append((shared, excl))
        if verdict.status == "correct" and verdict.timing:
            timings.setdefault(req.tag[0], {}).setdefault(f"gpu{_gpu_of(verdict)}", []).append(verdict.timing.median_ms)
        if verdict.status != "correct":
            print("not correct:", req.tag, verdict.status, verdict.message[:200], flush=True)
        if stats.samples % 20 == 0:
            print(json.dumps(stats.summary()), flush=True)
    out = stats.summary()
    busy, total = (b - a for a, b in zip(cpu_before, _cpu_times()))
    jobs = args.build_jobs or max(1, (len(os.sched_getaffinity(0)) - 2 * args.gpus) // 2)
    out.update(
        utilisation={
            "cpu": round(busy / total, 3) if total else None,  # all cores this process may use
            "build_stage": round(stats.build_s / (out["wall_s"] * jobs), 3) if out["wall_s"] else None,
        }
    )
    out.update(
        lease_overlaps=overlaps(leases),
        statuses=statuses,
        gpus_asked=args.gpus,
        per_gpu=args.per_gpu,
        seconds=args.seconds,
        latency_median_s={k: round(statistics.median(v), 1) for k, v in per_backend.items() if v},
        stage_median_s={k: round(statistics.median(v), 3) for k, v in sorted(stages.items())},
        timing_by_gpu={
            k: {g: [round(statistics.median(t), 4), round(min(t), 4), round(max(t), 4), len(t)] for g, t in v.items()}
            for k, v in timings.items()
        },
    )
    return out


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the CPUs this process may run on, from /proc/stat."""
    allowed = os.sched_getaffinity(0)
    busy = total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in allowed:
            values = [int(v) for v in fields[:8]]
            total += sum(values)
            busy += sum(values) - values[3] - values[4]  # minus idle and iowait
    return busy, total


def _gpu_of(verdict) -> str:
    return next((n.split("=", 1)[1] for n in verdict.notes if n.startswith("gpu=")), "?")


# ------------------------------------------------------------------------------------------- probe


def bench_probe(args) -> dict:
    from kernelzero.service.pool import PoolStats, VerifyRequest, verify_many

    oob = next(f for f in load_fixtures() if f.path.stem == "cuda_leaky_relu_oob_write")
    good = next(f for f in correct_fixtures("triton") if f.path.stem == "triton_leaky_relu")
    stats = PoolStats()
    out = {}
    # one after the other: the crash first, then a sample on the same GPU, whose judge must probe it
    for req in (
        VerifyRequest(oob.task(), oob.source, "cuda", oob.verify_options(), tag="oob"),
        VerifyRequest(good.task(), good.source, "triton", good.verify_options(), tag="after"),
    ):
        for done, verdict in verify_many([req], gpus=[0], per_gpu=1, stats=stats):
            out[done.tag] = {
                "status": verdict.status,
                "message": verdict.message[:200],
                "notes": list(verdict.notes),
                "stage_seconds": verdict.stage_seconds,
            }
            print(done.tag, out[done.tag], flush=True)
    out["pool"] = stats.summary()
    return out


# ------------------------------------------------------------------------------------------- stages


def bench_stages(args) -> dict:
    """One verification at a time, stage by stage, with GPU tensors through CUDA IPC and through host memory."""
    from kernelzero.verify import verify

    baselines = tempfile.mkdtemp(prefix="kz-baselines-")
    out = []
    for name in args.fixtures:
        fx = next(f for f in correct_fixtures() if f.path.stem == name)
        for ipc in (True, False):
            start = time.monotonic()
            v = verify(
                fx.task(),
                variant(fx.source, fx.backend, len(out)),
                fx.backend,
                fx.verify_options(device="cuda", cuda_ipc=ipc, baselines_dir=baselines),
            )
            row = {
                "fixture": name,
                "ipc": ipc,
                "status": v.status,
                "wall_s": round(time.monotonic() - start, 2),
                "stages": {k: round(x, 3) for k, x in v.stage_seconds.items() if not k.endswith("_at")},
                "notes": [n for n in v.notes if "host memory" in n],
                "message": v.message[:200],
            }
            print(json.dumps(row), flush=True)
            out.append(row)
    return {"runs": out}


def bench_latency(args) -> dict:
    """Time to first result of one Triton candidate at a time: a cold judge vs a standby one (verify/judge/standby.py).

    Per fixture: variant 0 cold (it also measures the task's eager baseline, kept in the baselines folder),
    variant 1 cold (unless --skip-cold), then one through a standby judge started `--ready-s` seconds before
    (an unrecorded first request starts the first one).
    """
    from kernelzero.verify import verify
    from kernelzero.verify.judge.standby import Standby

    baselines = tempfile.mkdtemp(prefix="kz-baselines-")
    standby = Standby(1)
    rows = []
    hows = ("cold, baseline measured", "standby") if args.skip_cold else ("cold, baseline measured", "cold", "standby")
    try:
        first = correct_fixtures("triton")[0]  # one unrecorded request starts the first standby judge
        verify(
            first.task(),
            variant(first.source, first.backend, 99),
            first.backend,
            first.verify_options(device="cuda", baselines_dir=baselines, gpu_index=0),
            standby=standby,
        )
        for fx in correct_fixtures("triton")[: args.fixtures]:
            opts = fx.verify_options(device="cuda", baselines_dir=baselines, gpu_index=0)
            for i, how in enumerate(hows):
                if how == "standby":
                    time.sleep(args.ready_s)  # the standby asked for by the previous standby request gets ready
                start = time.monotonic()
                v = verify(
                    fx.task(),
                    variant(fx.source, fx.backend, i),
                    fx.backend,
                    opts,
                    standby=standby if how == "standby" else None,
                )
                if how == "standby" and not any(n.startswith("standby worker") for n in v.notes):
                    how = "standby asked, none ready (cold)"  # the first: nothing was started before it
                row = {
                    "fixture": fx.path.stem,
                    "how": how,
                    "status": v.status,
                    "wall_s": round(time.monotonic() - start, 2),
                    "stages": {k: round(x, 3) for k, x in v.stage_seconds.items() if not k.endswith("_at")},
                    "notes": [n for n in v.notes if "standby" in n],
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        standby.close()
    summary = {
        how: round(statistics.median([r["wall_s"] for r in rows if r["how"] == how]), 2)
        for how in sorted({r["how"] for r in rows})
    }
    return {"rows": rows, "median_wall_s": summary, "standby_taken": standby.taken}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("builds")
    b.add_argument("--baseline", type=int, default=2)
    b.add_argument("--fast", type=int, default=5)
    b.add_argument("--fast-plain", type=int, default=0)
    b.add_argument("--fast-nosplit", type=int, default=0)
    t = sub.add_parser("throughput")
    t.add_argument("--seconds", type=float, default=300)
    t.add_argument("--gpus", type=int, default=1)
    t.add_argument("--per-gpu", type=int, default=3)
    t.add_argument("--build-jobs", type=int, default=None)
    t.add_argument("--cuda-share", type=float, default=0.5)
    sub.add_parser("probe")
    st = sub.add_parser("stages")
    st.add_argument("fixtures", nargs="*", default=["triton_leaky_relu", "cuda_relu"])
    lat = sub.add_parser("latency")
    lat.add_argument("--fixtures", type=int, default=8)
    lat.add_argument("--ready-s", type=float, default=12.0)
    lat.add_argument("--skip-cold", action="store_true", help="no second cold request per fixture")
    for p in (b, t, st, lat, sub.choices["probe"]):
        p.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import faulthandler
    import threading

    faulthandler.dump_traceback_later(float(os.environ.get("KZ_BENCH_DUMP_S", "1e9")), repeat=False)
    if args.cmd == "throughput":

        def progress() -> None:
            while True:
                time.sleep(30)
                print("progress", json.dumps(_live_stats.summary()) if _live_stats else "-", flush=True)

        threading.Thread(target=progress, daemon=True).start()
    result = {
        "builds": bench_builds,
        "throughput": bench_throughput,
        "probe": bench_probe,
        "stages": bench_stages,
        "latency": bench_latency,
    }[args.cmd](args)
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
