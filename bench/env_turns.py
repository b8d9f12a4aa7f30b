"""The kernel environment on a GPU: one scripted episode (a wrong kernel, then correct ones) through the local pool,
printing what each turn's observation tells the model once a GPU times the kernel (timing against eager and
torch.compile, the kernels launched; the profile line says none was taken: the verifier has no profiled run yet).

    PYTHONPATH=src python3 bench/env_turns.py [--task level1/21_GELU] [--preset smoke] [--out bench/out/env_turns.md]

Without a GPU it runs the same episode on CPU (Triton's interpreter; nothing is timed), which is how it was tested.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelzero.env import KernelEnv, Verifier  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402
from kernelzero.verify import options_for  # noqa: E402

KERNELS = ROOT / "tests" / "kernels"
SCRIPTS = {  # task -> the completions of turns 1, 2, 3 (fixtures written for that task)
    "level1/21_GELU": ["wrong/triton_gelu_bad_mask.py", "correct/triton_gelu.py", "correct/triton_gelu.py"],
}


def fenced(path: str) -> str:
    return "```python\n" + (KERNELS / path).read_text() + "```\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="level1/21_GELU", choices=sorted(SCRIPTS))
    parser.add_argument("--preset", default=None, help="a size preset of the task (default: its bench sizes)")
    parser.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (slow to compile)")
    parser.add_argument("--out", default=None, help="also write the table to this markdown file")
    args = parser.parse_args()

    (task,) = select(load_suite("kz-basic").tasks, names=[args.task])
    task = resize(task, preset=args.preset) if args.preset else task
    import torch

    on_gpu = torch.cuda.is_available()
    opts = options_for("default", policy="strict", compile_check=on_gpu, compile_baseline=args.compile_baseline)
    env = KernelEnv(
        "triton", max_turns=3, reward="speedup", verifier=Verifier.pool(opts, jobs=2), stop_on_correct=False
    )
    ep = env.reset(task)
    rows, observations = [], []
    for turn, path in enumerate(SCRIPTS[args.task], 1):
        start = time.monotonic()
        res = env.step(ep, fenced(path))
        v = res.verdict
        speed = "-" if v.speedup_eager is None else f"{v.speedup_eager:.2f}x"
        rows.append(f"| {turn} | {path} | {v.status} | {res.reward:.3f} | {speed} | {time.monotonic() - start:.1f} |")
        observations.append(f"### turn {turn}\n\n```\n{res.observation}\n```")
    device = torch.cuda.get_device_name() if on_gpu else "cpu"
    lines = [
        f"## env_turns: {args.task} on {device}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"`PYTHONPATH=src python3 bench/env_turns.py --task {args.task}"
        + (f" --preset {args.preset}`" if args.preset else "`"),
        "",
        "| turn | completion | status | reward (speedup) | speedup over eager | seconds |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"best turn: {ep.best_turn() + 1 if ep.best_turn() is not None else '-'}; done: {ep.done} ({ep.done_reason})",
        "",
        *observations,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
