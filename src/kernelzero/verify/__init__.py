"""The verifier: the only code in kernelzero that runs generated code.

    from kernelzero.verify import verify, options_for
    verdict = verify(task, completion_or_source, "triton", options_for("default"))

`verify()` extracts the code, rejects what is not a Python module defining `ModelNew` or fails the static
checks (`precheck`), then runs a trusted *judge* process (`judge/`) that builds the reference, draws inputs from
a secret seed and keeps the expected outputs, and an untrusted *worker* process (`worker/`) in a sandbox
(`sandbox/`) that imports the candidate and runs it. Each kernel language is a record in `backends.BACKENDS`
and a folder in `backends/`: without a GPU, Triton candidates run through Triton's interpreter with bounds
checks and are then compiled for sm_90; CUDA candidates get a compile check of their sources with nvcc and the
status `compiled`. docs/architecture.md has the picture of the parts.

Statuses (a closed set, `kernelzero.types.STATUSES`) and what maps to them:

| status | when |
|---|---|
| format_error | no code in the completion; not valid Python; no `class ModelNew(nn.Module)` |
| compile_error | `load_inline` build failed; a Triton kernel failed to compile (on the GPU, or for sm_90 on CPU); nvcc rejected the CUDA source (CPU) |
| runtime_error | an exception importing the module, constructing ModelNew or in forward; an out-of-bounds access caught by the interpreter's bounds check |
| timeout | no reply within the limit (build: `build_timeout_s`; a call: max(floor, scale x reference time)) |
| crash | the worker died: a signal (SIGSEGV ...), an illegal memory access / CUDA launch failure, an exit without a result (`os._exit(0)` included) |
| oom | CUDA out of memory, or the worker's resident memory passed `host_mem_gb` |
| infra_error | not the candidate's verdict (rewards and metrics skip it): the verification could not be carried out, after one retry; stage `gpu_memory`: out of GPU memory caused by another tenant; `judge`: a verifier process was killed; `gpu_health`: the GPU failed its health probe before the sample ran (verify/judge/lease.py); `runner`: the verifier's own judge or runner died twice, or no healthy GPU is left (service/pool.py, service/ray_pool.py); `exception`: an unexpected exception in the verifier (`verdicts.fault_verdict`) |
| task_broken | not the candidate's verdict (rewards and metrics skip it): the task's own reference code fails alone in a clean retry (stage `reference`; the message starts "the task itself is broken") |
| shape_mismatch | wrong number or type of outputs, or a wrong shape |
| dtype_mismatch | an output's dtype differs from the reference's |
| nan_or_inf | NaN/Inf where the reference is finite |
| mismatch | values outside atol + rtol * abs(expected), in a correctness trial or in a timed call |
| input_mutated | an input tensor differs after the call |
| compiled | no GPU: the CUDA source compiled for the target GPU; nothing ran |
| static_violation | a static check found a forbidden construct (verify/static.py: introspection, monkeypatching, threads, processes, file writes, the reference `Model`, try/except fallbacks to PyTorch, native threads/streams in CUDA) |
| no_kernel | no kernel construct in the source, or a forward call (correctness or timed) launched none of the candidate's own kernels |
| torch_compute | policy `strict`: a PyTorch compute op ran inside forward (allocation, copies and views are allowed) |
| bad_output | an output is a tensor subclass, has a zero stride, or shares memory with an input or another output |
| tampered | a function the harness relies on (timers, events, synchronise, comparison, the result channel) was replaced |
| unconfirmed_speedup | a speedup above `speedup_cap` was not confirmed by a stricter second verification |
| correct | all trials matched (and, on a GPU, the timed calls' outputs too) |

Threat model (what is and is not protected) is in README.md, "The verifier's trust model".
"""

# Names are loaded on first use (PEP 562): the judge launcher and the candidate's worker import modules of this
# package, which runs this file first; they must not load the whole verifier (the launcher starts the worker before
# it imports torch, and the less of kernelzero a candidate's process holds, the less it can reach).
_EXPORTS = {
    "verify": "kernelzero.verify.api",
    "precheck": "kernelzero.verify.api",
    "format_problem": "kernelzero.verify.api",
    "early_verdict": "kernelzero.verify.verdicts",
    "infra_verdict": "kernelzero.verify.verdicts",
    "fault_verdict": "kernelzero.verify.verdicts",
    "VerifyOptions": "kernelzero.verify.options",
    "options_for": "kernelzero.verify.options",
    "tolerances": "kernelzero.verify.options",
    "BACKENDS": "kernelzero.verify.backends",
    "get_backend": "kernelzero.verify.backends",
    "register": "kernelzero.verify.backends",
    "extract_code": "kernelzero.extract",
    "Verdict": "kernelzero.types",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelzero.verify' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
