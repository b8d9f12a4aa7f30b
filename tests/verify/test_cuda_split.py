"""The host/device split of a CUDA source (verify/backends/cuda/split.py): what it produces and what it refuses.

Text only (fast). Compiling the split units: tests/verify/test_cuda_build.py and the GPU fixtures.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelzero.verify.backends.cuda.split import Refused, split_cuda

ROOT = Path(__file__).resolve().parents[2]

SOURCE = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>
#define THREADS 256
constexpr int kUnroll = 4;
struct Pair { float a; float b; };

__device__ __forceinline__ float twice(float v) { return 2.0f * v; }

__global__ void __launch_bounds__(256) scale(const float* __restrict__ x, float* y, Pair p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int u = 0; u < 1; ++u)
        if (i < n) y[i] = twice(x[i]) * p.a + p.b;  // a comment with <<< inside the kernel is fine
}

__global__ void fill(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 0.f; }

torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    Pair p{1.f, 0.f};
    scale<<<(n + THREADS - 1) / THREADS, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), p, n);
    fill<<<dim3(1, 1), dim3(32), 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 0);
    return y;
}
"""


def test_kernels_go_to_a_torch_free_unit_and_launches_go_through_launchers():
    split = split_cuda(SOURCE)
    assert split.kernels == ("fill", "scale")
    assert "torch" not in split.device.replace("kz_launch", "") and "at::" not in split.device
    for unit in (split.device, split.host):  # macros, constants and types reach both, in order
        assert unit.index("#define THREADS") < unit.index("constexpr int kUnroll") < unit.index("struct Pair")
    assert "__global__" not in split.host and "<<<" not in split.host
    assert "twice" not in split.host  # device functions stay on the device
    assert re.search(
        r"kz_launch_scale\(dim3\(\(n \+ THREADS - 1\) / THREADS\), dim3\(THREADS\), \(size_t\)\(0\), "
        r"\(cudaStream_t\)\(0\), x\.data_ptr<float>\(\), y\.data_ptr<float>\(\), p, n\)",
        split.host,
    )
    assert "(cudaStream_t)(at::cuda::getCurrentCUDAStream())" in split.host
    # the launcher launches with its own parameters, in the kernel's order and types
    assert (
        "void kz_launch_scale(dim3 kz_grid, dim3 kz_block, size_t kz_smem, cudaStream_t kz_stream, "
        "const float* __restrict__ x, float* y, Pair p, int n) {" in split.device
    )
    assert "scale<<<kz_grid, kz_block, kz_smem, kz_stream>>>(x, y, p, n);" in split.device
    assert split.host.count("void kz_launch_scale(") == 1 and split.host.startswith("#include <torch/types.h>\n")


def test_every_correct_cuda_fixture_splits_with_its_macros_in_both_units():
    for path in sorted((ROOT / "tests" / "kernels" / "correct").glob("cuda_*.py")):
        text = path.read_text()
        cuda = "// a leading comment, as the benchmarks add\n" + text.split('r"""', 1)[1].split('"""', 1)[0]
        split = split_cuda(cuda)
        assert split.kernels and "<<<" not in split.host, path.name
        assert "torch/" not in split.device, path.name
        for define in re.findall(r"^#define .*$", cuda, re.M):
            assert define in split.device and define in split.host, (path.name, define)


def test_a_directive_after_a_comment_is_its_own_item():
    split = split_cuda(
        "/* header */\n// more\n#define N 4\n__global__ void k(float* x) { x[0] = N; }\n"
        "void f(float* x) { k<<<1, N>>>(x); }\n"
    )
    assert "#define N 4" in split.host and "#define N 4" in split.device


@pytest.mark.parametrize(
    "source, why",
    [
        ("template <typename T> __global__ void k(T* x) {}\nvoid f(float* x) { k<float><<<1, 1>>>(x); }", "template"),
        ("__constant__ float c[4];\n__global__ void k(float* x) { x[0] = c[0]; }", "__constant__"),
        ("__device__ int counter;\n__global__ void k(int* x) { x[0] = counter; }", "device variable"),
        (
            "static int calls = 0;\n__global__ void k(int* x) {}\nvoid f(int* x) { calls++; k<<<1, 1>>>(x); }",
            "global variable",
        ),
        ("#ifdef FOO\n#define N 1\n#endif\n__global__ void k(int* x) {}", "conditional"),
        ("namespace {\n__global__ void k(int* x) {}\n}", "namespace"),
        ('extern "C" __global__ void k(int* x) {}', "extern"),
        (
            "__host__ __device__ int sq(int v) { return v * v; }\n__global__ void k(int* x) { x[0] = sq(2); }",
            "__host__",
        ),
        ("__global__ void k(int* x) {}\nvoid f(int* x) { void* p = (void*)k; }", "used other than"),
        (
            '__global__ void k(int* x) {}\nvoid f(int* x) { const char* s = "k<<<1,1>>>(x)"; k<<<1, 1>>>(x); }',
            "comment or string",
        ),
        ("__global__ void k(int*) {}\nvoid f(int* x) { k<<<1, 1>>>(x); }", "without a name"),
        ("__global__ void k(int* x) { at::Half h; }", "names torch"),
        (
            "struct S { __device__ float get() const { return 1.f; } };\n__global__ void k(float* x) {}",
            "device members",
        ),
        ("struct S { int a; } shared_s;\n__global__ void k(float* x) {}", "declares a variable"),
        ("void helper() {}", "no kernel"),
        ("__global__ void kz_launch_k(int* x) {}", "prefix"),
        ("__global__ void k(float* x) {\n#define N 4\n x[0] = N; }", "directive inside"),
    ],
)
def test_what_the_split_does_not_model_is_refused(source, why):
    with pytest.raises(Refused, match=why):
        split_cuda(source)


def test_device_units_of_the_fixtures_compile_with_nvcc_and_no_torch(tmp_path):
    """The device unit stands alone: nvcc compiles it with no torch include path (a few seconds each)."""
    import subprocess

    from kernelzero.verify.backends.cuda.source import find_nvcc

    nvcc = find_nvcc()
    if not nvcc:
        pytest.skip("no nvcc here")
    for path in sorted((ROOT / "tests" / "kernels" / "correct").glob("cuda_*.py")):
        cuda = path.read_text().split('r"""', 1)[1].split('"""', 1)[0]
        unit = tmp_path / f"{path.stem}.cu"
        unit.write_text(split_cuda(cuda).device)
        done = subprocess.run(
            [
                str(nvcc),
                "-c",
                str(unit),
                "-o",
                str(unit.with_suffix(".o")),
                "-std=c++17",
                "-gencode=arch=compute_90,code=sm_90",
                "-O3",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{path.name}: {done.stderr[-2000:]}"


def test_host_code_gets_nvccs_defines_and_at_most_O1():
    from kernelzero.verify.backends.cuda.capture import InlineBuild
    from kernelzero.verify.backends.cuda.split import host_defines_and_opt

    def flags(cuda_flags: tuple[str, ...], cflags: str = "-fPIC") -> list[str]:
        build = InlineBuild(
            name="m", cpp_sources=("",), cuda_sources=("",), functions=None, extra_cuda_cflags=cuda_flags
        )
        return host_defines_and_opt(build, cflags).split()

    assert "-D__CUDA_NO_HALF_OPERATORS__" in flags(())
    assert flags(("-O3",))[-1] == "-O1" and flags(("-O3", "-O2"))[-1] == "-O1"
    assert flags(("-O0",))[-1] == "-O0" and flags(("-O1",))[-1] == "-O1"
    assert flags((), "-fPIC -O2")[-1] == "-O0"  # nvcc gives no -O: the C++ flag's level must not reach host code
