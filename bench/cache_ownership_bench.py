"""The shared build cache under root and the sandbox user, end to end on a GPU host (issue 14, item 3).

Two orders, each with a fresh cache folder: the pool (root's builders, workers as `nobody`) then the
single-sample path (`verify`, whose worker builds privately on a miss), and the reverse. Prints one line per
step: the verdict, whether the worker built privately, and who owns what is in the cache (only root may).
Before the fix, the single-sample step after a pool run gave runtime_error (PermissionError under `pch/`).

    PYTHONPATH=src python3 bench/cache_ownership_bench.py            # as root, on a GPU host, ~3-5 minutes
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelzero.service.contract import VerifyRequest  # noqa: E402
from kernelzero.service.pool import verify_many  # noqa: E402
from kernelzero.tasks import load_suite  # noqa: E402
from kernelzero.verify import options_for, verify  # noqa: E402

CASES = {"softmax": ("level1/15_Softmax", "cuda_softmax.py"), "relu": ("level1/24_LeakyReLU", "cuda_relu.py")}


def _case(name: str):
    task_name, fixture = CASES[name]
    task = next(t for t in load_suite("kz-basic").tasks if t.name == task_name)
    source = (ROOT / "tests" / "kernels" / "correct" / fixture).read_text()
    return task, source


def _owners(cache: Path) -> str:
    """The uids that own anything under the cache, and anything others may write."""
    uids, writable = set(), 0
    for path in [cache, *cache.rglob("*")]:
        st = path.lstat()
        uids.add(st.st_uid)
        writable += bool(st.st_mode & 0o022)
    return f"uids {sorted(uids)}, {writable} writable by others"


def _single(name: str, cache: Path):
    task, source = _case(name)
    return verify(task, source, "cuda", options_for(device="cuda", build_cache=str(cache)))


def _pool(name: str, cache: Path):
    task, source = _case(name)
    request = VerifyRequest(task, source, "cuda", options_for(device="cuda"))
    return next(iter(verify_many([request], gpus=[0], per_gpu=1, build_cache=str(cache))))[1]


def main() -> int:
    if os.geteuid() != 0:
        print("run as root: the point is root's cache read by workers running as `nobody`")
        return 2
    steps = {
        "pool then single": [("pool", "softmax"), ("single", "softmax"), ("single", "relu")],
        "single then pool": [("single", "softmax"), ("pool", "softmax"), ("single", "softmax")],
    }
    print(f"{'order':18s} {'step':7s} {'case':8s} {'status':14s} {'s':>6s}  private build  cache owners")
    bad = 0
    for order, plan in steps.items():
        cache = Path(tempfile.mkdtemp(prefix="kz-cache-own-")) / "builds"
        for how, name in plan:
            start = time.monotonic()
            verdict = (_pool if how == "pool" else _single)(name, cache)
            private = "yes" if any("built privately" in n for n in verdict.notes) else "no"
            owners = _owners(cache) if cache.exists() else "(no cache folder)"
            bad += verdict.status != "correct" or not owners.startswith(("uids [0], 0 writable", "(no cache"))
            print(
                f"{order:18s} {how:7s} {name:8s} {verdict.status:14s} {time.monotonic() - start:6.1f}  {private:13s}  {owners}"
            )
            if verdict.status != "correct":
                print(f"    {verdict.message[:300]}\n    {verdict.error_log[-600:]}")
    print("ok" if not bad else f"{bad} step(s) not correct or a cache not root's alone")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
