# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A7 Lazy or deferred output (a tensor subclass, or overridden instance methods)
# policy: strict
# expect: bad_output
# why: forward launches only a one-element decoy and returns an empty torch.Tensor subclass that runs the real GELU kernel when the checker first touches it (__torch_function__), so timed calls measure nothing; outputs must be exactly torch.Tensor
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), mask=mask)


@triton.jit
def touch_kernel(ptr):
    tl.store(ptr, tl.load(ptr))  # one element rewritten unchanged: "a kernel ran in forward"


class LazyGelu(torch.Tensor):
    @staticmethod
    def __new__(cls, x: torch.Tensor):
        self = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        self._src = x
        self._done = False
        return self

    def _materialise(self) -> None:
        self._done = True
        with torch._C.DisableTorchFunctionSubclass():
            n = self._src.numel()
            gelu_kernel[(triton.cdiv(n, 4096),)](self._src, self, n, BLOCK=4096)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for arg in list(args) + list(kwargs.values()):
            if isinstance(arg, LazyGelu) and not getattr(arg, "_done", True):
                arg._materialise()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        touch_kernel[(1,)](x)
        return LazyGelu(x)
