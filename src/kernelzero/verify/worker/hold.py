"""The GPU hold: one kernel that takes every warp slot of every SM before each timed call, so the host's launch path
stays out of the call's time and nothing on another stream runs where no clock sees it (worker/timing.py).

Why. A timed call that starts its clock on an idle GPU counts the host's launch path (the forward's Python, Triton's
launcher, ATen's dispatch) as kernel time: about 0.05-0.13 ms a call on the H200, the whole time of a small kernel
(issue 26). `triton.testing.do_bench` hides that path behind its L2 flush, but the flush leaves SMs free for work a
candidate puts on a stream of its own, which would then run before the start event and be seen by no clock.

What the kernel does (`kz_hold`, compiled once per process with NVRTC through torch, launched through the driver):
- a grid of exactly the blocks that fill every SM's thread slots (2 x 1024 threads per SM on Hopper;
  `__launch_bounds__` keeps the registers within the SM's file), so while it runs no other block can be resident;
- after each call the host releases the hold, waits for the call's end event, then for the whole device: the time
  between the two is the work the call left running on other streams past its end event; a run's *outlive* is the
  median of its calls' gaps less the median over `CALIBRATE` empty calls made at its start behind holds of the same
  length (`outlive_ms`), added to each of its calls under the default profile and compared by the judge's
  `escaped_work` under the kernelbench one; the next hold starts on an idle GPU. (Measured on the H200, 2026-12-04:
  a hold's own block-arrival spread does not see such work, since the work's blocks not yet resident simply wait
  behind the hold and run after it, beside the next call.)
- every block waits until all are resident; block 0 then tells the host (`started`, pinned host memory), and all
  write the L2 flush buffer (256 MB: the L2 cache holds nothing of the previous call);
- block 0 waits for the host's release (written after the forward's last launch and the end event are queued), and
  for at least `min_ns` after the start; the others wait for block 0. Then the start event, the forward's kernels
  and the end event run back to back on the GPU: the event interval holds the GPU's work alone.
- A cap (`CAP_US`) ends every wait, so a forward that synchronises the device inside itself (which waits for the
  hold while the hold waits for it) stalls for the cap and is then timed as it runs; such calls are counted
  (`capped`).

Boundaries. The flags and arrays live in the candidate's process and its code could write them: the hold takes the
host's launch path out of honest kernels' times, it defends nothing on its own. The judge's clock bounds every block
(judge/timing_checks.py `check_clock`), as before. Copy engines are not SMs: a copy the candidate queues on a stream
of its own can overlap the hold; the static rules refuse CUDA streams in C++ sources (verify/static.py).

`Hold.create(device)` returns None (with the reason in `Hold.unavailable`) where the kernel cannot be built or
launched (no NVRTC, an older torch without `torch.cuda._compile_kernel`): the worker then times each call the older
way (a device-wide synchronise before its start event).
"""

from __future__ import annotations

import ctypes
import time

import torch

FLUSH_BYTES = 256 * 1024 * 1024
CAP_US = 2000  # the longest any wait of the hold lasts (a forward that synchronises inside itself)
CALIBRATE = 8  # empty calls before each run: the median gap of a call that leaves nothing on the GPU (its baseline)
HOST_WAIT_S = 60.0  # the host waits this long at most for a hold to start (a kernel before it may run long)
_clock = time.perf_counter

_SOURCE = r"""
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ u64 kz_now() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void __launch_bounds__(KZ_THREADS, KZ_PER_SM)
kz_hold(u32* state, volatile int* host, int4* flush, i64 flush_n, u32 gen, u32 min_ns, u32 cap_us)
{
    __shared__ u64 t_all;
    const u64 cap = (u64)cap_us * 1000ull;
    if (threadIdx.x == 0) {
        const u64 t0 = kz_now();
        atomicAdd(&state[0], 1u);
        volatile u32* vs = state;
        const u32 target = gen * gridDim.x;
        int late = 0;
        while ((int)(vs[0] - target) < 0) {
            if (kz_now() - t0 > cap) { late = 1; break; }
            __nanosleep(32);
        }
        t_all = kz_now();
        if (blockIdx.x == 0) {
            if (late) atomicAdd(&state[2], 1u);
            host[0] = (int)gen;
            __threadfence_system();
        }
    }
    __syncthreads();
    const i64 stride = (i64)gridDim.x * blockDim.x;
    const int4 zero = make_int4(0, 0, 0, 0);
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < flush_n; i += stride) flush[i] = zero;
    __syncthreads();
    if (threadIdx.x == 0) {
        const u64 t1 = kz_now();
        volatile u32* vs = state;
        if (blockIdx.x == 0) {
            while (host[1] != (int)gen || kz_now() - t_all < (u64)min_ns) {
                if (kz_now() - t1 > cap) { atomicAdd(&state[2], 1u); break; }
                __nanosleep(64);
            }
            __threadfence();
            atomicExch(&state[1], gen);
        } else {
            while ((int)(vs[1] - gen) < 0) {
                if (kz_now() - t1 > cap) break;
                __nanosleep(64);
            }
        }
    }
    __syncthreads();
}
"""


def outlive_ms(gaps_s: list[float], base_s: float) -> float:
    """A run's outlive per call, ms: the median of its calls' gaps (end event to an idle device, host seconds) less
    the median gap of the run's empty calls (`base_s`), at least 0. A median, not each call's own gap: the gap is the
    host's wake-up, whose tail (p90 1-40 us on the H200, longer behind longer holds) would otherwise be added to
    every call it hits, so that honest kernels of 4-60 us read 2-30 us slow and vary by that between runs
    (2026-12-04); work a forward leaves behind on every call moves the median by its length."""
    if not gaps_s:
        return 0.0
    return max(0.0, (middle(gaps_s) - base_s) * 1e3)


def middle(values: list[float]) -> float:
    """The middle of `values` once sorted (the upper one of two middles): a median that is one of the gaps measured."""
    return sorted(values)[len(values) // 2]


def kernel_source(threads: int, per_sm: int) -> str:
    """The hold kernel's CUDA source for blocks of `threads`, `per_sm` of them on each SM."""
    return _SOURCE.replace("KZ_THREADS", str(threads)).replace("KZ_PER_SM", str(per_sm))


def _shape(props) -> tuple[int, int]:
    """(threads a block, blocks an SM) that fill an SM's thread slots exactly."""
    per_sm = int(getattr(props, "max_threads_per_multi_processor", 2048))
    threads = next(t for t in (1024, 768, 512, 256, 128, 64, 32) if per_sm % t == 0)
    return threads, per_sm // threads


class Hold:
    """One process's hold kernel and its flags (see the module docstring). Used by one thread at a time:
    `begin(stream, mins_us)`, then per call `wait()` before the start event, `settle(end)` after the end event and
    `arm()` for the next call (`next(end)`: both at once), then `end()` for each call's outlive (ms) and the number of capped holds."""

    unavailable = ""

    def __init__(self, device: str, kernel, launch) -> None:
        props = torch.cuda.get_device_properties(torch.device(device))
        self.threads, per_sm = _shape(props)
        self.grid = props.multi_processor_count * per_sm
        self.kernel, self.launch = kernel, launch
        self.state = torch.zeros(4, dtype=torch.int32, device=device)  # [blocks arrived, released, capped, -]
        self.flags_t = torch.zeros(2, dtype=torch.int32, pin_memory=True)
        self.flags = self.flags_t.numpy()  # [started, release]: written by the GPU and by the host
        self.flush = torch.empty(FLUSH_BYTES // 16, 4, dtype=torch.int32, device=device)
        self.gen, self.capped, self.mins = 0, 0, [0.0]
        self.ready: tuple[int, float] | None = None  # (stream, first hold's us) a `calibrate` ran for, until `begin`
        self.slot, self.outlive, self.base_s = 0, [], 0.0
        self._args = [
            ctypes.c_void_p(self.state.data_ptr()),
            ctypes.c_void_p(self.flags_t.data_ptr()),
            ctypes.c_void_p(self.flush.data_ptr()),
            ctypes.c_longlong(self.flush.shape[0]),
            ctypes.c_uint(0),
            ctypes.c_uint(0),
            ctypes.c_uint(CAP_US),
        ]
        self._params = (ctypes.c_void_p * len(self._args))(*[ctypes.addressof(a) for a in self._args])
        self._stream = ctypes.c_void_p(0)

    @classmethod
    def create(cls, device: str) -> Hold | None:
        """The hold for `device`, tried once; None where it cannot run (`unavailable` says why)."""
        try:
            props = torch.cuda.get_device_properties(torch.device(device))
            kernel = torch.cuda._compile_kernel(kernel_source(*_shape(props)), "kz_hold")
            lib = ctypes.CDLL("libcuda.so.1")
            launch = lib.cuLaunchKernel
            launch.restype = ctypes.c_int
            launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
            hold = cls(device, kernel, launch)
            hold.check()
            return hold
        except Exception as exc:  # noqa: BLE001 - any failure: time the older way, and say why
            cls.unavailable = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None

    def _launch(self) -> None:
        self.gen += 1
        self._args[4].value = self.gen
        self._args[5].value = int(max(0.0, self.mins[self.slot]) * 1e3) if self.slot < len(self.mins) else 0
        func = self.kernel.func
        code = self.launch(func, self.grid, 1, 1, self.threads, 1, 1, 0, self._stream, self._params, None)
        if code != 0:
            raise RuntimeError(f"the GPU hold did not launch (CUDA driver error {code})")
        self.slot += 1

    def calibrate(self, stream: torch.cuda.Stream, first_us: float) -> None:
        """`CALIBRATE` empty calls on `stream` behind holds of `first_us`: the next run's baseline (`base_s`, the
        median gap of a call that leaves nothing behind). `begin` runs it unless it ran for that stream and length
        since the last run: the worker's `time_stage` does (`KZ_STAGE_CALIBRATE`), so the judge's clock for the
        block holds the block's calls alone, not these 8 holds and their synchronises (about 1 ms of a 5 ms block,
        H100 2026-12-05: bench/verify.md, twentieth session)."""
        torch.cuda.synchronize()
        self._stream.value = stream.cuda_stream
        self.mins, self.slot, self.outlive = [float(first_us)] * (CALIBRATE + 1), 0, []
        self._launch()
        for _ in range(CALIBRATE):
            self.wait()
            end = torch.cuda.Event()
            end.record(stream)
            self.next(end)
        self.base_s = middle(self.outlive)
        self.flags[1] = self.gen
        torch.cuda.synchronize()
        self.ready = (stream.cuda_stream, float(first_us))

    def begin(self, stream: torch.cuda.Stream, mins_us: list[float]) -> None:
        """Start a run of `len(mins_us) - 1` calls on `stream` (the hold before call k lasts at least `mins_us[k]`
        microseconds): calibrated for the first call's length (`calibrate`, unless done ahead for it), then the first
        call's hold is launched on an idle device."""
        first = float(mins_us[0]) if mins_us else 0.0
        if self.ready != (stream.cuda_stream, first):
            self.calibrate(stream, first)  # ends on an idle device
        else:
            torch.cuda.synchronize()
        self.ready = None  # a calibration serves one run
        self._stream.value = stream.cuda_stream
        self.mins, self.slot, self.outlive = list(mins_us), 0, []
        self._launch()

    def wait(self) -> None:
        """Until the current hold holds every SM (the previous call's work on all streams has ended)."""
        flags, gen, give_up = self.flags, self.gen, _clock() + HOST_WAIT_S
        while flags[0] != gen:
            if _clock() > give_up:
                raise RuntimeError("the GPU hold never started (the GPU is held by another program?)")

    def settle(self, end: torch.cuda.Event) -> None:
        """Release the current hold (the call's launches and `end`, its end event, are queued behind it); wait for
        the end event, then for the whole device: the seconds between the two are the call's outlive (work it left
        on other streams). No hold runs until `arm`: what the host does in between (an allocation, which may wait
        for the device) cannot stall behind a hold that waits for the host."""
        self.flags[1] = self.gen
        end.synchronize()
        ended = _clock()
        torch.cuda.synchronize()
        self.outlive.append(_clock() - ended)

    def arm(self) -> None:
        """Queue the next call's hold (behind whatever the host queued since `settle`)."""
        self._launch()

    def next(self, end: torch.cuda.Event) -> None:
        """`settle(end)`, then `arm()`: the next hold queued on an idle GPU."""
        self.settle(end)
        self.arm()

    def end(self) -> tuple[list[float], int]:
        """Release the last hold, wait for the device; (per call: ms the run's work outlived its end events, beyond
        an empty call's (`outlive_ms`, the same for every call of the run); holds that hit the cap)."""
        self.flags[1] = self.gen
        torch.cuda.synchronize()
        total = int(self.state[2].item())
        capped, self.capped = total - self.capped, total
        return [outlive_ms(self.outlive, self.base_s)] * len(self.outlive), capped

    def check(self) -> None:
        """One empty run: the kernel launches, holds and lets go (its calibration sets the first baseline)."""
        stream = torch.cuda.current_stream()
        self.begin(stream, [0.0, 0.0])
        self.wait()
        end = torch.cuda.Event()
        end.record(stream)
        self.next(end)
        self.end()
