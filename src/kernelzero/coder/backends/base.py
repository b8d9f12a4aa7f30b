"""What every generation backend takes and returns.

A caller (`kernelzero eval`, the training loop) hands a backend many requests at once, one per task,
each asking for several samples:

    backend = load_backend("openai:qwen2.5-coder-7b", concurrency=16)
    requests = [GenRequest(task.name, build_messages(task, "triton")) for task in tasks]
    results = backend.generate(requests, SamplingParams(n=10, max_tokens=8192), on_done=write_samples)

`on_done(request, generations)` is called in the caller's thread as soon as some samples of a request
are finished (one at a time for an HTTP server, a batch for a local model, everything at once for a
replay), so a caller that appends them to a JSONL file loses at most what was in flight when a run is
interrupted. A resumed run asks only for the samples it lacks with `GenRequest.sample_idxs`.

A generation that failed for good (an HTTP 400, retries exhausted, a timeout) comes back as a
`Generation` with `finish_reason="error"` and the reason in `error`; it never raises out of
`generate`, so one bad request cannot end a batch. What a backend could not provide at all (a replay
file without enough samples) is listed in its `warnings` after the call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SamplingParams:
    """How to sample, the same for every request of one `generate` call."""

    n: int = 1  # samples per request (unless the request lists its sample_idxs)
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0  # nucleus sampling mass
    max_tokens: int = 4096  # new tokens per sample, thinking included
    seed: int | None = None  # base seed: sample i of a request is drawn with seed + i where the backend allows

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"SamplingParams.max_tokens must be >= 1, got {self.max_tokens}")

    def seed_for(self, sample_idx: int) -> int | None:
        """The seed of one sample (None when unseeded)."""
        return None if self.seed is None else self.seed + sample_idx


@dataclass(frozen=True)
class GenRequest:
    """One prompt and the samples wanted for it."""

    key: str  # the caller's name for it, unique within a call (eval uses Task.name; replay matches it)
    messages: Sequence[dict[str, str]]  # chat messages, {"role": ..., "content": ...}
    sample_idxs: tuple[int, ...] = ()  # which samples to make; () = 0 .. params.n - 1

    def indices(self, params: SamplingParams) -> tuple[int, ...]:
        """The sample indices this request asks for under `params`."""
        return tuple(self.sample_idxs) if self.sample_idxs else tuple(range(params.n))


@dataclass(frozen=True)
class Generation:
    """One sample's completion, or why there is none."""

    text: str  # the completion ("" when the generation failed)
    output_tokens: int | None = None  # completion tokens as counted by the backend (None: not reported)
    prompt_tokens: int | None = None  # prompt tokens as counted by the backend
    finish_reason: str = ""  # "stop", "length", ... as the backend says; "error" when it failed
    seconds: float = 0.0  # wall time of this sample (its share of a batch for batched backends)
    sample_idx: int = 0  # which sample of its request this is
    seed: int | None = None  # the seed it was drawn with, when the backend took one
    error: str = ""  # why it failed (HTTP status and the server's message, timeout ...); "" on success

    @property
    def ok(self) -> bool:
        return not self.error


OnDone = Callable[[GenRequest, list[Generation]], None]


class Backend(Protocol):
    """A source of completions. `generate` returns {request.key: generations sorted by sample_idx}."""

    spec: str  # the model spec it was loaded from ("openai:MODEL", ...), recorded as Sample.model
    warnings: list[str]  # what the last `generate` call could not provide, one line each

    def generate(
        self, requests: Sequence[GenRequest], params: SamplingParams, on_done: OnDone | None = None
    ) -> dict[str, list[Generation]]: ...


def check_requests(requests: Sequence[GenRequest]) -> None:
    """Raise ValueError on duplicate keys or negative sample indices."""
    seen: set[str] = set()
    for req in requests:
        if req.key in seen:
            raise ValueError(f"duplicate request key {req.key!r}")
        seen.add(req.key)
        if any(i < 0 for i in req.sample_idxs):
            raise ValueError(f"request {req.key!r}: negative sample index in {req.sample_idxs}")


def sorted_results(results: dict[str, list[Generation]]) -> dict[str, list[Generation]]:
    """The same results with each list in sample_idx order."""
    return {key: sorted(gens, key=lambda g: g.sample_idx) for key, gens in results.items()}
