"""Helion's worker hook (`verify/backends/helion/hook.py`) and its interpreter math (`libdevice.py`).

The patches are tested on stand-in `Kernel` / `BoundKernel` classes (no Helion import: 20 s), the import-time
patching on a package written here, and the libdevice replacements on a plain Triton kernel in Triton's
interpreter (a child process with TRITON_INTERPRET=1). The real Helion runs through the verifier in
tests/verify/test_helion_fixtures.py.

    .venv/bin/python -m pytest -q -p no:xdist tests/verify/test_helion_hook.py
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kernelzero.verify.backends.helion import hook
from kernelzero.verify.worker.worker import classify

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    paused = 0


def fake_helion(seen: list) -> types.ModuleType:
    """A module shaped like helion.runtime.kernel: `bind` and `ensure_config_exists` note the recorder's state."""
    module = types.ModuleType("fake_kernel")
    guards = types.SimpleNamespace(recorder=Recorder())
    lowering = type("InductorLoweringError", (Exception,), {"__module__": "helion.exc"})

    class Kernel:
        def bind(self, args):
            seen.append(("bind", guards.recorder and guards.recorder.paused))
            if args == "bad":
                raise lowering("cannot lower aten.pow")
            if args == "type":
                raise TypeError("missing a required argument: 'y'")
            return BoundKernel()

        def _bind(self, args):
            return self.bind(args)

        def autotune(self, args):
            seen.append("tuned")

        def autotune_multi(self, args):
            seen.append("tuned")

    class BoundKernel:
        _config = None

        def _normalize_config(self, config):
            return config

        def ensure_config_exists(self, args):
            seen.append(("compile", guards.recorder.paused))
            self.set_config("A")

        def set_config(self, config):
            self._config = config

        def autotune(self, args, force=False):
            seen.append("tuned")

    module.Kernel, module.BoundKernel = Kernel, BoundKernel
    return module, guards


def test_helions_compile_steps_run_with_the_op_recorder_paused():
    seen: list = []
    module, guards = fake_helion(seen)
    hook.patch(module, guards)
    kernel = module.Kernel()
    kernel._bind(("x",)).ensure_config_exists(("x",))
    assert seen == [("bind", 2), ("compile", 1)]  # re-entrant: _bind calls bind
    assert guards.recorder.paused == 0
    guards.recorder = None  # outside an observed call: nothing to pause
    assert isinstance(kernel.bind(("x",)), module.BoundKernel) and seen[-1] == ("bind", None)


def test_helions_own_errors_become_compile_errors_and_others_stay():
    module, guards = fake_helion([])
    hook.patch(module, guards)
    with pytest.raises(hook.CompilationError, match="cannot lower aten.pow") as info:
        module.Kernel().bind("bad")
    assert classify(info.value) == "compile_error"
    assert guards.recorder.paused == 0
    with pytest.raises(TypeError) as info:
        module.Kernel().bind("type")
    assert classify(info.value) == "runtime_error"


def test_autotuning_is_refused_everywhere():
    seen: list = []
    module, guards = fake_helion(seen)
    hook.patch(module, guards)
    kernel = module.Kernel()
    for call in (kernel.autotune, kernel.autotune_multi, kernel.bind(("x",)).autotune):
        with pytest.raises(hook.AutotuneRefused, match="one config=helion.Config"):
            call(("x",))
    assert "tuned" not in seen


def test_a_compiled_kernel_keeps_its_first_config():
    module, guards = fake_helion([])
    hook.patch(module, guards)
    bound = module.Kernel().bind(("x",))
    bound.ensure_config_exists(("x",))
    bound.set_config("A")  # the same config again is fine
    with pytest.raises(hook.AutotuneRefused, match="the config timed must be the config checked"):
        bound.set_config("B")
    assert bound._config == "A"


def test_install_sets_helions_settings_and_patches_on_import(tmp_path, monkeypatch):
    package = tmp_path / "kzfakehelion" / "runtime"
    package.mkdir(parents=True)
    (tmp_path / "kzfakehelion" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    source = "class Kernel:\n    def bind(self, args):\n        return args\n" * 1
    source += "    def _bind(self, args):\n        return args\n    def autotune(self, a):\n        return 'tuned'\n"
    source += "    def autotune_multi(self, a):\n        return 'tuned'\n\n\nclass BoundKernel:\n"
    source += "    def ensure_config_exists(self, a):\n        pass\n    def set_config(self, c):\n        pass\n"
    source += "    def autotune(self, a):\n        return 'tuned'\n"
    (package / "kernel.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(hook, "TARGET", "kzfakehelion.runtime.kernel")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setenv("HELION_INTERPRET", "1")
    monkeypatch.delenv("HELION_AUTOTUNE_EFFORT", raising=False)
    guards = types.SimpleNamespace(recorder=None)

    installed = hook.install(guards, "cpu", interpret=False)
    assert os.environ["HELION_AUTOTUNE_EFFORT"] == "none" and "HELION_INTERPRET" not in os.environ
    assert installed.notes() == [] and not installed.patched  # nothing imported Helion yet: no note
    module = importlib.import_module("kzfakehelion.runtime.kernel")
    assert installed.patched and installed.notes() and installed.guard_input(3) == 3
    with pytest.raises(hook.AutotuneRefused):
        module.Kernel().autotune(())
    assert "def bind" in inspect.getsource(module)  # the real loader still answers for the module's source
    for name in [m for m in sys.modules if m.startswith("kzfakehelion")]:
        del sys.modules[name]


def test_install_patches_at_once_when_helion_is_loaded(monkeypatch):
    module, guards = fake_helion([])
    monkeypatch.setitem(sys.modules, hook.TARGET, module)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    before = list(sys.meta_path)
    installed = hook.install(guards, "cpu", interpret=False)
    assert installed.patched and sys.meta_path == before
    with pytest.raises(hook.AutotuneRefused):
        module.Kernel().autotune(())


LIBDEVICE_CHILD = """
import torch, triton, triton.language as tl
from triton.language.extra import libdevice
from kernelzero.verify.backends.helion import libdevice as replacement
replacement.install()

@triton.jit
def math_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    for k in tl.static_range(9):
        if k == 0:
            y = libdevice.erf(x)
        elif k == 1:
            y = libdevice.tanh(x)
        elif k == 2:
            y = libdevice.rsqrt(tl.abs(x) + 0.5)
        elif k == 3:
            y = libdevice.sqrt(tl.abs(x))
        elif k == 4:
            y = libdevice.log1p(tl.abs(x))
        elif k == 5:
            y = libdevice.expm1(x)
        elif k == 6:
            y = libdevice.isnan(x / x).to(tl.float32)
        elif k == 7:
            y = libdevice.isinf(1.0 / x).to(tl.float32)
        else:
            y = libdevice.fabs(x)
        tl.store(o_ptr + k * n + offs, y, mask=m)

x = torch.cat([torch.linspace(-12, 12, 997), torch.zeros(3)])
out = torch.empty(9, x.numel())
math_kernel[(4,)](x, out, x.numel(), BLOCK=256)
a = x.abs()
want = [torch.erf(x), torch.tanh(x), torch.rsqrt(a + 0.5), a.sqrt(), torch.log1p(a), torch.expm1(x),
        (x / x).isnan().float(), (1.0 / x).isinf().float(), a]
for k, w in enumerate(want):
    err = ((out[k] - w).abs() / (w.abs() + 1)).max().item()
    assert err < 2e-6, (k, err)
print("ok", len(want))
"""


@pytest.mark.slow
def test_libdevice_functions_run_in_the_interpreter():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", LIBDEVICE_CHILD], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "ok 9" in done.stdout, done.stderr[-3000:]
