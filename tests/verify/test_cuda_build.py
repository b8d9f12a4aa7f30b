"""The build stage: fast cached builds of load_inline extensions and the worker's cache hook (CPU).

CUDA sources cannot be built without a CUDA torch; these tests build C++ extensions through the same
recipe (torch's ninja writer, the cache, export/install, the hook) and test the CUDA-only header change
on text. The GPU builds are measured by bench/service_bench.py.
"""

import io
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from kernelzero.verify.backends.cuda import pch
from kernelzero.verify.backends.cuda.build import (
    EXTENSION_INCLUDE,
    build_extension,
    build_key,
    lighten,
    toolchain,
)
from kernelzero.verify.backends.cuda.build_cache import BuildCache
from kernelzero.verify.backends.cuda.capture import InlineBuild
from kernelzero.verify.backends.cuda.hook import load_library

SRC = Path(__file__).resolve().parents[2] / "src"
MODULE = """
#include <pybind11/pybind11.h>
static int triple(int x) { return 3 * x + %d; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("triple", &triple); }
"""


def _build(offset: int, name: str = "kz_triple") -> InlineBuild:
    return InlineBuild(
        name=name,
        cpp_sources=(MODULE % offset,),
        cuda_sources=(),
        functions=None,
        with_cuda=False,
        no_implicit_headers=True,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = BuildCache(tmp_path_factory.mktemp("cache"))
    return cache, build_extension(_build(0), cache)


def test_build_loads_and_the_cache_answers_the_same_build(built):
    cache, result = built
    assert result.ok and not result.cached, result.log
    assert set(result.seconds) >= {"main.cpp", "link", "total"}
    assert load_library("kz_triple", result.library).triple(5) == 15
    again = build_extension(_build(0), cache)
    assert again.cached and again.library == result.library and again.seconds["total"] < 1.0


def test_key_covers_sources_name_and_toolchain():
    tools = toolchain()
    keys = {
        build_key(_build(0), tools),
        build_key(_build(1), tools),
        build_key(_build(0, "other"), tools),
        build_key(_build(0), {**tools, "torch": "0.0"}),
    }
    assert len(keys) == 4


def test_failed_build_reports_the_compiler_error_and_stores_nothing(tmp_path):
    cache = BuildCache(tmp_path)
    bad = InlineBuild(
        name="kz_bad",
        cpp_sources=("int f( { return undeclared_name; }",),
        cuda_sources=(),
        functions=None,
        with_cuda=False,
        no_implicit_headers=True,
    )
    result = build_extension(bad, cache)
    assert not result.ok and "error" in result.log and result.library == ""
    assert cache.get(result.key) is None


def test_export_install_roundtrip_and_hostile_archives_are_ignored(built, tmp_path):
    cache, result = built
    blobs = cache.export([result.key, "0" * 64])
    assert list(blobs) == [result.key]
    other = BuildCache(tmp_path / "other")
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    other.install({**blobs, "f" * 64: evil.getvalue()})
    assert load_library("kz_triple", other.get(result.key)).triple(1) == 3
    assert other.get("f" * 64) is None and not (tmp_path / "escape.txt").exists()


def test_worker_hook_loads_a_prebuilt_library_without_building(built, tmp_path):
    cache, result = built
    private = tmp_path / "private"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(SRC)!r})
        import torch.utils.cpp_extension as ce
        from kernelzero.verify.backends.cuda.hook import install_cache_hook
        install_cache_hook({str(cache.root)!r}, {str(private)!r})
        m = ce.load_inline("kz_triple", [{(MODULE % 0)!r}], no_implicit_headers=True)
        print("RESULT", m.triple(7))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "RESULT 21" in done.stdout, done.stderr[-2000:]
    assert not private.exists() or not any(private.rglob("*.so"))  # nothing was built privately


def test_worker_hook_builds_privately_on_a_miss_and_raises_like_torch_on_errors(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(SRC)!r})
        import torch.utils.cpp_extension as ce
        from kernelzero.verify.backends.cuda.hook import install_cache_hook
        install_cache_hook({str(tmp_path / "shared")!r}, {str(tmp_path / "private")!r})
        try:
            ce.load_inline("kz_broken", ["int f( {{"], no_implicit_headers=True)
        except RuntimeError as exc:
            print("RAISED", str(exc).splitlines()[0])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "RAISED Error building extension 'kz_broken'" in done.stdout, done.stderr[-2000:]


def test_light_headers_drop_only_the_extension_include():
    text = '#include <torch/types.h>\n#include <torch/extension.h>\n  # include "torch/extension.h"\n// torch/extension.h\n'
    out = lighten(text)
    assert "#include <torch/types.h>" in out and "// torch/extension.h" in out
    assert not EXTENSION_INCLUDE.search(out) and out.count("\n") == text.count("\n")  # line numbers kept


def test_units_with_a_precompiled_header_include_it_once():
    text = '#include <torch/types.h>\nint a;\n #include "torch/types.h"\n#include <torch/types.hpp>\n'
    out = pch.first_include_only(text, "types")
    assert out.startswith("#include <torch/types.h>\nint a;\n// repeated include")
    assert out.count("\n") == text.count("\n") and "#include <torch/types.hpp>" in out


TENSOR_FN = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"


@pytest.fixture(scope="module")
def pch_root(tmp_path_factory):
    return tmp_path_factory.mktemp("pch")


@pytest.mark.slow
def test_bindings_build_with_the_light_precompiled_header_even_when_the_source_includes_torch(pch_root, tmp_path):
    """The fast path: main.cpp starts with kernelzero/bindings.h, precompiled (~55 s once on 2 cores); LLM
    sources often start with `#include <torch/extension.h>` (dropped), and a second include of a precompiled
    header used to fail the build."""
    import torch

    build = InlineBuild(
        name="kz_dup",
        cpp_sources=(f"#include <torch/extension.h>\n{TENSOR_FN}",),
        cuda_sources=(),
        functions=("twice",),
        with_cuda=False,
    )
    result = build_extension(build, BuildCache(tmp_path), pch_root=pch_root)
    assert result.ok, result.log
    assert result.transforms == ("light-bindings", "pch") and result.seconds.get("pch", 0) > 0
    assert load_library("kz_dup", result.library).twice(torch.arange(3.0)).tolist() == [0.0, 2.0, 4.0]
    again = InlineBuild(
        name="kz_dup2", cpp_sources=(TENSOR_FN,), cuda_sources=(), functions=("twice",), with_cuda=False
    )
    second = build_extension(again, BuildCache(tmp_path), pch_root=pch_root)  # the header is built once
    assert second.ok and "pch" in second.transforms and "pch" not in second.seconds


@pytest.mark.slow
def test_source_that_needs_the_cpp_frontend_falls_back_to_the_files_as_written(tmp_path):
    """torch::nn is not in the light header: the fast path fails, the files as written build (~70 s)."""
    import torch

    fn = "torch::Tensor act(torch::Tensor x) { return torch::nn::functional::relu(x); }"
    build = InlineBuild(name="kz_nn", cpp_sources=(fn,), cuda_sources=(), functions=("act",), with_cuda=False)
    result = build_extension(build, BuildCache(tmp_path), use_pch=False)
    assert result.ok, result.log
    assert result.transforms == ("light-bindings-fell-back",)
    assert load_library("kz_nn", result.library).act(torch.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
