"""Who called: the candidate's code, or a library's internals; and the wrappers that report what the candidate's code
calls (host compute, probes of the harness). Installed by the worker (`install`) before the candidate is imported.

Boundaries. Everything here runs in the candidate's process, so it is a first filter: it can reject a candidate,
never accept one, and native code (or plain Python that reaches these closures, which the static rules refuse) can
switch it off. What it reports travels in the worker's authenticated reply (sandbox/channel.py).

Attribution (`user_file`, `from_user_code`): a frame is *user code* when its file lies outside every library folder
(the standard library, site-packages, torch, Triton, Helion, kernelzero) and is not one of the interpreter's own
`<frozen ...>` modules: the candidate's module (and, in the reference's process, the task's). `from_user_code`
walks outward from a frame: the first frame that is either user code or a kernel language's own internals
(Triton's runtime and interpreter, Helion, kernelzero's backends; not `triton/testing.py`, which calls whatever it
is given) decides; torch, numpy, the standard library and kernelzero's guards are passed through. So PyTorch work
that Triton's runtime does for a launch is its own, while PyTorch work in a pre-run hook, a grid function or a
kernel body the interpreter runs is the candidate's: its frame comes first.

Records (`Watch`):
- `host`: host compute from user code inside forward: `Tensor.numpy`, `tolist`, `__array__`, `__dlpack__`,
  `torch.from_numpy`, `torch.from_dlpack`, `torch.frombuffer`, more than `ITEM_LIMIT` `.item()` per call, and any
  use of ctypes' loaders and casts from the candidate's import on (names `host:...`). The strict policy treats
  them as PyTorch compute (`torch_compute`): work that is not the candidate's kernels.
- `probes`: calls from user code to what tells a watched call from a timed one: the dispatch and function mode
  stacks and their helpers, the dispatch key sets, the profile and trace hooks, and (inside forward) the clocks
  (`time.*`, `timeit.default_timer`, CUDA event intervals, `triton.testing.do_bench`). The judge rejects a candidate
  that probes (`tampered`). Only the immediate caller counts for probes (torch's own code reads its mode stack and
  the clock all the time).

Every wrapper is installed once, before the candidate's import, and stays for every call: nothing here differs
between a watched (audit) call and a timed one, and a wrapper costs nothing unless it is called.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

ITEM_LIMIT = 16  # `.item()` reads per forward call beyond which the call computes on the host
HOST_COPY_MIN = 16  # elements: a device -> host copy at least this large inside forward is host compute


def _folder(module: Any) -> str | None:
    path = getattr(module, "__file__", None)
    return os.path.dirname(path) + os.sep if path else None


def _spec_folder(name: str) -> str | None:
    """A top-level package's folder without importing it (Helion is heavy and optional)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "")


_KZ = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # .../kernelzero/
_TRITON = _spec_folder("triton")
_HELION = _spec_folder("helion")
_SITE = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))) + os.sep
LIBRARY = tuple(
    p
    for p in {_folder(os), _SITE, _folder(torch), _TRITON, _HELION, _KZ, os.path.abspath(_folder(os) or "/") + os.sep}
    if p
)
INTERNALS = tuple(p for p in (_TRITON, _HELION, os.path.join(_KZ, "verify", "backends", "")) if p)
NOT_INTERNAL = tuple(p for p in ((_TRITON + "testing.py") if _TRITON else None,) if p)


def user_file(name: str) -> bool:
    """Is a frame of file `name` user code (the candidate's, or the task's in the reference's process)?"""
    if name.startswith("<"):
        return not name.startswith(("<frozen", "<kernelzero-runner>"))
    return not name.startswith(LIBRARY)


def from_user_code(frame) -> bool:
    """Walking outward from `frame`: does user code come before any kernel language's own internals?"""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(INTERNALS) and not name.startswith(NOT_INTERNAL):
            return False
        if user_file(name):
            return True
        frame = frame.f_back
    return False


class Watch:
    """What the wrappers saw; `in_forward` is set by the worker around its forward calls (`run`, `time`)."""

    def __init__(self) -> None:
        self.host: set[str] = set()
        self.probes: set[str] = set()
        self.items = 0
        self.armed = False  # from the candidate's import on
        self.in_forward = False

    def end_call(self, calls: int) -> None:
        """After `calls` forward calls (a command's, counted outside any timed region): more than ITEM_LIMIT
        `.item()` reads a call were host compute."""
        if self.items > ITEM_LIMIT * calls:
            self.host.add("host:item")
        self.items = 0

    def take(self) -> tuple[list[str], list[str]]:
        """(host compute, probes) seen since the last take."""
        host, probes = sorted(self.host), sorted(self.probes)
        self.host, self.probes = set(), set()
        return host, probes


def _named(wrapper: Callable, original: Callable, name: str) -> Callable:
    """`wrapper` looking like `original` (name and doc), without `__wrapped__` (that would hand out the original)."""
    wrapper.__name__ = getattr(original, "__name__", name.rsplit(".", 1)[-1])
    wrapper.__qualname__ = getattr(original, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


def _probe(watch: Watch, original: Callable, name: str, forward_only: bool) -> Callable:
    getframe, user = sys._getframe, user_file

    def probe(*args, **kwargs):
        if watch.armed and (watch.in_forward or not forward_only) and user(getframe(1).f_code.co_filename):
            watch.probes.add(name)
        return original(*args, **kwargs)

    return _named(probe, original, name)


def _host(watch: Watch, original: Callable, name: str, always: bool = False) -> Callable:
    getframe, user = sys._getframe, from_user_code

    def host(*args, **kwargs):
        if watch.armed and (always or watch.in_forward) and user(getframe(1)):
            watch.host.add(name)
        return original(*args, **kwargs)

    return _named(host, original, name)


def _item(watch: Watch, original: Callable) -> Callable:
    getframe, user = sys._getframe, from_user_code

    def item(*args, **kwargs):
        if watch.in_forward and user(getframe(1)):
            watch.items += 1
        return original(*args, **kwargs)

    return _named(item, original, "item")


DISPATCH_STATE = {
    "torch._C": (
        "_len_torch_dispatch_stack",
        "_get_dispatch_stack_at",
        "_get_dispatch_mode",
        "_pop_torch_dispatch_stack",
        "_push_on_torch_dispatch_stack",
        "_set_dispatch_mode",
        "_unset_dispatch_mode",
        "_len_torch_function_stack",
        "_get_function_stack_at",
        "_pop_torch_function_stack",
        "_push_on_torch_function_stack",
        "_is_torch_function_mode_enabled",
        "_dispatch_tls_local_include_set",
        "_dispatch_tls_local_exclude_set",
        "_dispatch_tls_is_dispatch_key_included",
        "_dispatch_tls_is_dispatch_key_excluded",
    ),
    "torch.utils._python_dispatch": (
        "_get_current_dispatch_mode",
        "_get_current_dispatch_mode_stack",
        "is_in_torch_dispatch_mode",
        "is_in_any_mode_without_ignore_compile_internals",
        "any_torch_dispatch_mode_on",
        "_pop_mode",
        "_pop_mode_temporarily",
        "_disable_current_modes",
    ),
    "torch.overrides": (
        "_get_current_function_mode",
        "_get_current_function_mode_stack",
        "_pop_mode",
        "_pop_mode_temporarily",
        "_is_torch_function_mode_enabled",
    ),
    "sys": ("getprofile", "gettrace"),
    "threading": ("getprofile", "gettrace"),
}
CLOCKS = {
    "time": (
        "perf_counter",
        "perf_counter_ns",
        "monotonic",
        "monotonic_ns",
        "time",
        "time_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
        "clock_gettime",
        "clock_gettime_ns",
    ),
    "timeit": ("default_timer",),
    "triton.testing": ("do_bench", "do_bench_cudagraph"),
}
HOST_FUNCTIONS = {"torch": ("from_numpy", "from_dlpack", "frombuffer"), "torch.utils.dlpack": ("from_dlpack",)}
HOST_METHODS = ("numpy", "tolist", "__array__", "__dlpack__")
CTYPES = ("cast", "string_at", "wstring_at", "memmove", "memset", "CFUNCTYPE", "PYFUNCTYPE", "byref", "pointer")


def _swap(module_name: str, names: tuple[str, ...], make: Callable[[Callable, str], Callable]) -> None:
    module = sys.modules.get(module_name)
    if module is None:
        return
    for attr in names:
        original = module.__dict__.get(attr)
        if callable(original):
            setattr(module, attr, make(original, f"{module_name}.{attr}"))


def install(watch: Watch) -> None:
    """Put every wrapper in place (once per process, before the candidate's import)."""
    if "triton" in sys.modules:
        try:
            import triton.testing  # noqa: F401 - so that its benchmarking functions are wrapped too
        except ImportError:
            pass
    for module, names in DISPATCH_STATE.items():
        _swap(module, names, lambda fn, name: _probe(watch, fn, name, forward_only=False))
    for module, names in CLOCKS.items():
        _swap(module, names, lambda fn, name: _probe(watch, fn, name, forward_only=True))
    if hasattr(torch.cuda, "Event"):
        original = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = _probe(watch, original, "torch.cuda.Event.elapsed_time", forward_only=True)
    for module, names in HOST_FUNCTIONS.items():
        _swap(module, names, lambda fn, name: _host(watch, fn, f"host:{name}"))
    for attr in HOST_METHODS:
        original = getattr(torch.Tensor, attr, None)
        if original is not None:
            setattr(torch.Tensor, attr, _host(watch, original, f"host:Tensor.{attr}"))
    torch.Tensor.item = _item(watch, torch.Tensor.item)
    _swap("ctypes", CTYPES, lambda fn, name: _host(watch, fn, "host:ctypes", always=True))
    ctypes = sys.modules.get("ctypes")
    if ctypes is not None:
        for cls in (ctypes.CDLL, ctypes.LibraryLoader):
            for attr in ("__init__", "__getattr__", "__getitem__", "LoadLibrary"):
                original = cls.__dict__.get(attr)
                if original is not None:
                    setattr(cls, attr, _host(watch, original, "host:ctypes", always=True))
