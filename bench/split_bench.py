"""CUDA build time with and without the host/device split, on a machine without a GPU (CPU torch).

    TORCH_CUDA_ARCH_LIST=9.0 python3 bench/split_bench.py [CACHE_DIR]

Builds the CUDA fixtures' `load_inline` calls through `build_extension` with `split=True` and `split=False`
(one at a time; the precompiled headers, built by the first build, are one-time and reported apart). A CPU
torch has no CUDA libraries and no `CUDA_HOME`: objects are compiled for sm_90 with nvcc from /usr/local/cuda
and linked without `-lc10_cuda -ltorch_cuda` (the .so is not loadable, only timed); `ATen/cuda` includes,
whose cuSPARSE headers CPU machines lack, are removed from the sources with the two lines that need them.
On a GPU machine use `bench/service_bench.py builds` instead.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch.utils.cpp_extension as ce  # noqa: E402

ce.CUDA_HOME = ce.CUDA_HOME or "/usr/local/cuda"
_ldflags = ce._prepare_ldflags
ce._prepare_ldflags = functools.wraps(_ldflags)(
    lambda *a, **k: [f for f in _ldflags(*a, **k) if f not in ("-lc10_cuda", "-ltorch_cuda")]
)

from kernelzero.verify.backends.cuda import build as cuda_build  # noqa: E402
from kernelzero.verify.backends.cuda.build_cache import BuildCache  # noqa: E402
from kernelzero.verify.backends.cuda.capture import InlineBuild  # noqa: E402

CPU_ONLY = {
    "#include <ATen/cuda/CUDAContext.h>": "",
    "#include <c10/cuda/CUDAException.h>": "",
    "C10_CUDA_KERNEL_LAUNCH_CHECK();": "",
    "at::cuda::getCurrentCUDAStream()": "0",
}


def fixture_build(path: Path, tag: str) -> InlineBuild:
    text = path.read_text()
    cuda = text.split('r"""', 1)[1].split('"""', 1)[0]
    for old, new in CPU_ONLY.items():
        cuda = cuda.replace(old, new)
    cpp = text.split('_cpp_source = "', 1)[1].split('"', 1)[0]
    function = cpp.split("(", 1)[0].split()[-1]
    return InlineBuild(
        name=f"kz_{path.stem}_{tag}",
        cpp_sources=(cpp,),
        cuda_sources=(f"// {tag}\n{cuda}",),
        functions=(function,),
        extra_cuda_cflags=("-O3", "--use_fast_math"),
    )


def main(argv: list[str]) -> int:
    cache = BuildCache(argv[0] if argv else tempfile.mkdtemp(prefix="kz-splitbench-"))
    paths = [
        p
        for p in sorted((ROOT / "tests" / "kernels" / "correct").glob("cuda_*.py"))
        if '_cpp_source = "' in p.read_text()
    ]
    warm = cuda_build.build_extension(fixture_build(paths[0], "warm"), cache)
    print(json.dumps({"one_time_pch_s": warm.seconds.get("pch"), "ok": warm.ok}), flush=True)
    for path in paths:
        for split in (True, False):
            r = cuda_build.build_extension(fixture_build(path, f"split{int(split)}"), cache, split=split)
            print(
                json.dumps(
                    {
                        "candidate": path.stem,
                        "split": split,
                        "ok": r.ok,
                        "seconds": r.seconds,
                        "transforms": r.transforms,
                    }
                ),
                flush=True,
            )
            if not r.ok:
                print(r.log[-1500:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
