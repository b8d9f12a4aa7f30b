"""Time every kz-basic task at bench sizes on the GPU (eager, fp32, TF32 off) and check scaled sizes."""
import json, os, sys, tempfile, time
from pathlib import Path
import torch
from kernelzero.tasks import load_suite, resize, check_tasks, CheckOptions
from kernelzero.tasks.module import load_reference

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
out_dir = Path(os.environ.get("OUT", "."))
suite = load_suite("kz-basic")
print(torch.__version__, torch.cuda.get_device_name(), flush=True)
rows = []
for t in (suite.tasks if "--no-time" not in os.environ.get("KZB", "") else []):
    with tempfile.TemporaryDirectory() as d:
        ref = load_reference(t.source, {}, Path(d) / "task.py")
        torch.manual_seed(42)
        model = ref.model_cls(*ref.get_init_inputs()).eval().cuda()
        torch.manual_seed(43)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with torch.no_grad():
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            times = []
            for _ in range(10):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); model(*inputs); e.record(); torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
        times.sort()
        row = {"name": t.name, "median_ms": times[len(times) // 2], "min_ms": times[0],
               "peak_gb": peak / 1e9, "resident_gb": base / 1e9}
        rows.append(row)
        print(f"{t.name:45s} median {row['median_ms']:8.3f} ms  min {row['min_ms']:8.3f}  peak {row['peak_gb']:.2f} GB", flush=True)
        del model, inputs
        torch.cuda.empty_cache()
(out_dir / "timings.json").write_text(json.dumps(rows, indent=1))
for scale in [float(x) for x in sys.argv[1:]]:
    tasks = [resize(t, scale=scale) for t in suite.tasks]
    bad = [f"{r.name}: {r.error} {r.message} {r.degenerate}" for r in check_tasks(tasks, CheckOptions(device="cuda", strict=True, timeout_s=300, jobs=4))
           if not r.ok or r.degenerate]
    print(f"scale {scale}: {len(bad)} failing", *bad, sep="\n  ", flush=True)
