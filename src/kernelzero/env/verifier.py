"""How the kernel environment verifies a batch of completions: the local pool, a Ray cluster, or the HTTP service.

    Verifier.pool(options_for("default", policy="strict"), jobs=2, store=VerdictStore(path))   # service/pool.py
    Verifier.pool(options, pool="ray", ray_address="auto")                                    # a Ray cluster
    Verifier.http("http://gpu-host:8765", token="...", options={"profile": "default"})       # service/client.py
    Verifier(lambda items: [...], name="stand-in")                                            # tests, other services
    verdicts = verifier.verify([(task, completion, "triton"), ...])                           # in order

A batch is one call of the pool (`verify_many`) or one POST to the service. A (task, code, backend) that appears
more than once in a batch is verified once and its verdict shared: in RL the same short answer often comes back
from several samples of a group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kernelzero.extract import extract_code
from kernelzero.service.client import Client
from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore
from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Task, Verdict
from kernelzero.verify import VerifyOptions, options_for

Item = tuple[Task, str, str]  # (task, completion or code, backend)
RunBatch = Callable[[Sequence[Item]], Sequence[Verdict]]


def default_options() -> VerifyOptions:
    """The environment's default: the `default` profile (KernelBench's tolerance) under the strict policy."""
    return options_for("default", policy="strict")


class Verifier:
    """Verifies batches of (task, completion, backend); build with `pool`, `http`, or from a batch function."""

    def __init__(self, run: RunBatch, name: str = "custom"):
        self._run = run
        self.name = name  # "pool", "ray", "http" or what the caller named it

    @classmethod
    def pool(
        cls,
        options: VerifyOptions | None = None,
        jobs: int = 2,
        store: VerdictStore | None = None,
        on_verdict: Callable[[], Any] = lambda: None,
        **pool_kwargs: Any,
    ) -> Verifier:
        """Verification through `service.pool.verify_many` (pool_kwargs: gpus, per_gpu, pool="ray", ray_address...);
        `on_verdict()` is called as each verdict arrives (a progress bar)."""
        opts = options or default_options()

        def run(items: Sequence[Item]) -> list[Verdict]:
            requests = [
                VerifyRequest(task, text, backend, opts, tag=i) for i, (task, text, backend) in enumerate(items)
            ]
            out: list[Verdict | None] = [None] * len(requests)
            for req, verdict in verify_many(requests, jobs, store, **pool_kwargs):
                out[req.tag] = verdict
                on_verdict()
            missing = [i for i, v in enumerate(out) if v is None]
            if missing:
                raise RuntimeError(f"the pool returned no verdict for request(s) {missing}")
            return out  # type: ignore[return-value]

        return cls(run, name=str(pool_kwargs.get("pool", "pool")))

    @classmethod
    def http(
        cls,
        url: str,
        token: str | None = None,
        options: dict[str, Any] | None = None,
        timeout_s: float = 900.0,
        poll_s: float = 0.5,
    ) -> Verifier:
        """Verification through the HTTP service (`kernelzero serve`); `options`: the service's client options."""
        client = Client(url, token=token)
        opts = {"profile": "default", **(options or {})}

        def run(items: Sequence[Item]) -> list[Verdict]:
            batch = [(task, text, backend, opts) for task, text, backend in items]
            return client.verify_batch(batch, timeout_s=timeout_s, poll_s=poll_s)

        return cls(run, name="http")

    def verify(self, items: Sequence[Item]) -> list[Verdict]:
        """Verdicts of `items`, in order; duplicates (same task, extracted code and backend) are verified once."""
        keys = [(task_hash(task), task.name, extract_code(text), backend) for task, text, backend in items]
        first: dict[tuple, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        todo = sorted(first.values())
        if not todo:
            return []
        verdicts = list(self._run([items[i] for i in todo]))
        if len(verdicts) != len(todo):
            raise RuntimeError(f"verifier {self.name!r} returned {len(verdicts)} verdicts for {len(todo)} requests")
        found = dict(zip(todo, verdicts))
        return [found[first[key]] for key in keys]
