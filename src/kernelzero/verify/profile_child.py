"""The profiled run's child: `python -m kernelzero.verify.profile_child CALLS`, in the candidate's sandbox.

It runs in the folder verify/profile.py prepared (task.py: the task with its sizes; candidate.py), and talks in
lines on stdout, each starting with `kz-profile`, answering lines on stdin:

    kz-profile imported        torch is loaded; the parent takes its shared GPU lease, then sends a line
    kz-profile ready           ModelNew built and warmed on the device; the parent takes the GPU alone, sends a line
    kz-profile {"kernels": [[name, total_us, calls], ...], "device": "cuda"|"cpu"}
    kz-profile-error MESSAGE   whatever failed, in one line

Under torch.profiler it runs `CALLS` forward calls. On a GPU the rows are the device kernels (CUDA activity) with
their total device time; on a CPU, the operators by self CPU time. The candidate's code runs in this process, so it
can write what it likes here: the result is feedback for the Coder, never part of a verdict.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path

PREFIX = "kz-profile"


def _say(text: str) -> None:
    sys.stdout.write(f"{PREFIX} {text}\n")
    sys.stdout.flush()


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _to(value, device: str):
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


def rows_of(events, device: str, calls: int) -> list[list]:
    """[name, total microseconds per forward call, launches per call], the most expensive first."""
    from torch.autograd import DeviceType

    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for event in events:
        if device == "cuda":
            if event.device_type != DeviceType.CUDA:
                continue
            us = event.time_range.elapsed_us()
        else:
            if event.device_type != DeviceType.CPU or event.name.startswith("ProfilerStep"):
                continue
            us = event.self_cpu_time_total
        total[event.name] += us
        count[event.name] += 1
    rows = [[name, total[name] / calls, max(1, round(count[name] / calls))] for name in total]
    return sorted(rows, key=lambda row: -row[1])[:50]


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 3
    try:
        import torch

        _say("imported")
        sys.stdin.readline()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        task = _module(Path("task.py"), "kz_profile_task")
        candidate = _module(Path("candidate.py"), "kz_profile_candidate")
        model = candidate.ModelNew(*task.get_init_inputs()).to(device).eval()
        inputs = [_to(x, device) for x in task.get_inputs()]
        with torch.no_grad():
            for _ in range(2):
                model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            _say("ready")
            sys.stdin.readline()
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            with torch.profiler.profile(activities=activities) as prof:
                for _ in range(calls):
                    model(*inputs)
                if device == "cuda":
                    torch.cuda.synchronize()
        _say(json.dumps({"kernels": rows_of(prof.events(), device, calls), "device": device}))
    except BaseException as exc:  # noqa: BLE001 - one line for the parent, whatever the candidate raised
        sys.stdout.write(f"{PREFIX}-error {type(exc).__name__}: {str(exc)[:300]}\n".replace("\n", " ") + "\n")
        sys.stdout.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
