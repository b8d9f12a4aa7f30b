"""Tests of verify/backends/cuda/source.py: capturing `load_inline` calls and compile-checking CUDA sources without a GPU.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/verify/test_cuda_source.py -q`
Compile tests need nvcc (CUDA_HOME, CUDA_PATH, PATH or /usr/local/cuda) and skip without it. The one
`slow` test parses torch's headers (~25-45 s on an idle 2-core machine): it is the only proof that the
torch include flags and the stub headers work, so it stays in the default run.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kernelzero.verify.backends.cuda.source import (
    LOG_LIMIT,
    TRACEBACK_LIMIT,
    CaptureError,
    InlineBuild,
    capture_load_inline,
    compile_check,
    filter_flags,
    find_nvcc,
    first_errors,
    inline_files,
    parse_ptxas,
)

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (CUDA_HOME, CUDA_PATH, PATH)")

SCALE_KERNEL = """
__global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""


def plain_build(source: str, **kw) -> InlineBuild:
    """A build whose .cu holds only `source` (no torch headers), so nvcc takes about a second."""
    return InlineBuild(
        name="plain", cpp_sources=(), cuda_sources=(source,), functions=None, no_implicit_headers=True, **kw
    )


@pytest.fixture(scope="module")
def relu_builds() -> list[InlineBuild]:
    return capture_load_inline(str(KERNELS / "correct" / "cuda_relu.py"), timeout_s=120)


# ---------------------------------------------------------------------------------------------- capture


def test_capture_records_load_inline_arguments_without_building(relu_builds):
    # The CPU torch's real load_inline raises (CUDA_HOME is None), so a result means nothing was built.
    assert len(relu_builds) == 1
    build = relu_builds[0]
    assert build.name == "kz_relu"
    (fn,) = build.functions
    assert len(build.cpp_sources) == 1 and f"{fn}(" in build.cpp_sources[0]
    assert len(build.cuda_sources) == 1 and "__global__ void" in build.cuda_sources[0]
    assert f"torch::Tensor {fn}(" in build.cuda_sources[0]
    assert build.extra_cuda_cflags == ("-O3", "--use_fast_math")
    assert build.with_cuda is None and build.no_implicit_headers is False


def test_capture_syntax_error_is_a_typed_error():
    with pytest.raises(CaptureError) as info:
        capture_load_inline(str(KERNELS / "wrong" / "cuda_relu_syntax_error.py"), timeout_s=60)
    err = info.value
    assert err.kind == "import_error" and err.exc_type == "SyntaxError"
    assert "was never closed" in err.traceback_tail and "candidate.py" in err.traceback_tail
    assert len(err.traceback_tail) <= TRACEBACK_LIMIT


def test_capture_without_load_inline_is_empty():
    assert capture_load_inline(str(KERNELS / "wrong" / "cuda_relu_no_kernel.py"), timeout_s=120) == []


def test_capture_timeout_kills_the_child(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text("while True:\n    pass\n")
    start = time.monotonic()
    with pytest.raises(CaptureError) as info:
        capture_load_inline(str(hang), timeout_s=1.0)
    assert info.value.kind == "timeout"
    assert time.monotonic() - start < 10


# ------------------------------------------------------------------------------------- files and flags


def test_inline_files_match_load_inline_layout():
    build = InlineBuild(name="ext", cpp_sources=("int f(int x);",), cuda_sources=("A", "B"), functions=("f",))
    files = inline_files(build)
    assert files["main.cpp"] == (
        "#include <torch/extension.h>\nint f(int x);\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        'm.def("f", torch::wrap_pybind_function(f), "f");\n}'
    )
    assert files["cuda.cu"] == "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\nA\nB"


def test_filter_flags_drops_arch_and_unsafe_flags():
    kept, dropped = filter_flags(
        (
            "-O3",
            "--use_fast_math",
            "-Xptxas -v",
            "-arch=sm_80",
            "-gencode arch=compute_80,code=sm_80",
            "-ccbin /bin/sh",
            "--run",
            "-o /tmp/x",
            "-Xcompiler -fplugin=evil.so",
            "-Xcompiler -O3,-fopenmp",
            "-U__CUDA_NO_HALF_OPERATORS__",
        ),
        nvcc=True,
    )
    assert kept == [
        "-O3",
        "--use_fast_math",
        "-Xptxas",
        "-v",
        "-Xcompiler",
        "-O3,-fopenmp",
        "-U__CUDA_NO_HALF_OPERATORS__",
    ]
    assert "-arch=sm_80" in dropped and "arch=compute_80,code=sm_80" in dropped
    assert {"-ccbin", "/bin/sh", "--run", "-o", "/tmp/x", "-fplugin=evil.so"} <= set(dropped)
    host_kept, host_dropped = filter_flags(("-O3 -march=native", "-Wl,-rpath,/x", "-specs=evil"), nvcc=False)
    assert host_kept == ["-O3", "-march=native"] and host_dropped == ["-Wl,-rpath,/x", "-specs=evil"]


def test_first_errors_keeps_first_errors_within_the_limit():
    log = "\n".join(f'cuda.cu({i}): error: identifier "v{i}" is undefined\n  x = v{i};\n      ^\n' for i in range(500))
    text = first_errors(log)
    assert len(text) <= LOG_LIMIT
    assert text.startswith('cuda.cu(0): error: identifier "v0" is undefined\n  x = v0;')
    assert text.rstrip().endswith("more errors]")


def test_parse_ptxas_reads_registers_and_spills():
    log = """ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
ptxas info    : Function properties for _Z3fooPf
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]"""
    (usage,) = parse_ptxas(log)
    assert (usage.name, usage.registers, usage.spill_stores, usage.spill_loads) == ("_Z3fooPf", 255, 8, 12)
    assert (usage.stack_bytes, usage.shared_bytes) == (16, 4096)


# ---------------------------------------------------------------------------------------------- compile


def test_compile_check_without_nvcc_says_no_compiler(tmp_path):
    result = compile_check(plain_build(SCALE_KERNEL), workdir=tmp_path / "w", cuda_home=tmp_path)
    assert result.ok is None and result.stage == "no_compiler" and "nvcc" in result.log_tail


@needs_nvcc
def test_compile_check_plain_kernel_ok_with_registers(tmp_path):
    result = compile_check(
        plain_build(SCALE_KERNEL, extra_cuda_cflags=("-O3", "-arch=sm_80")), workdir=tmp_path, check_cpp=False
    )
    assert result.ok is True and result.stage == "compiled", result.log_tail
    assert [k.name for k in result.kernels] == ["_Z5scalePKfPffi"] and result.max_registers > 0
    assert result.spill_bytes == 0 and result.ignored_flags == ("-arch=sm_80",)


@needs_nvcc
def test_compile_check_undeclared_identifier_is_reported(tmp_path):
    result = compile_check(plain_build(SCALE_KERNEL.replace("i < n", "i < size")), workdir=tmp_path, check_cpp=False)
    assert result.ok is False and result.stage == "cuda"
    assert 'cuda.cu(4): error: identifier "size" is undefined' in result.log_tail
    assert "i < size" in result.log_tail  # the offending source line comes with it


@pytest.mark.skipif(shutil.which("c++") is None, reason="no c++")
def test_compile_check_cpp_error_is_reported(tmp_path):
    build = InlineBuild(
        name="cpp",
        cpp_sources=("int f(int x) { return y; }",),
        cuda_sources=(),
        functions=None,
        no_implicit_headers=True,
    )
    result = compile_check(build, workdir=tmp_path)
    assert result.ok is False and result.stage == "cpp"
    assert "main.cpp:1:23: error: 'y' was not declared in this scope" in result.log_tail


@needs_nvcc
def test_compile_check_cublas_call_is_inconclusive_not_an_error(tmp_path):
    if (Path(str(find_nvcc())).parent.parent / "include" / "cublas_v2.h").is_file():
        pytest.skip("real cuBLAS headers are installed here")
    source = "#include <cublas_v2.h>\nvoid f() { cublasHandle_t h; cublasCreate(&h); }\n"
    result = compile_check(plain_build(source), workdir=tmp_path, check_cpp=False)
    assert result.ok is None and result.stage == "needs_headers", result.log_tail


@needs_nvcc
def test_compile_check_timeout(tmp_path):
    result = compile_check(plain_build(SCALE_KERNEL), workdir=tmp_path, check_cpp=False, timeout_s=0.05)
    assert result.ok is False and result.stage == "timeout" and result.seconds < 5


@needs_nvcc
@pytest.mark.slow
def test_compile_check_torch_extension_with_cuda_context(relu_builds, tmp_path):
    # nvcc on cuda.cu (torch/extension.h, ATen/cuda/CUDAContext.h via the stubs) and c++ on main.cpp, in parallel.
    result = compile_check(relu_builds[0], workdir=tmp_path, timeout_s=600)
    assert result.ok is True and result.stage == "compiled", result.log_tail
    assert len(result.kernels) == 1 and "relu_kernel" in result.kernels[0].name, result.kernels
    assert result.spill_bytes == 0
