"""The check that no sample was timed while another ran on its GPU, over the lease spans verdicts record
(`stage_seconds`: gpu_lease_at, gpu_lease, gpu_excl_at, gpu_excl). Used by bench/service_bench.py and
tests/verify/test_lease.py."""

from __future__ import annotations


def overlaps(leases: dict[str, list]) -> dict[str, int]:
    """Per GPU: how many samples were timed (exclusive lease) while another sample held any lease on it (must be 0).

    `leases[gpu]`: per sample ((shared start, end), (exclusive start, end) or None), epoch seconds; 10 ms slack
    for the clock readings either side of a lock.
    """
    out = {}
    for gpu, samples in leases.items():

        def clash(i: int, excl: tuple[float, float], samples=samples) -> bool:
            return any(
                span is not None and span[0] < excl[1] - 0.01 and excl[0] < span[1] - 0.01
                for j, both in enumerate(samples)
                if j != i
                for span in both
            )

        out[gpu] = sum(1 for i, (_, excl) in enumerate(samples) if excl is not None and clash(i, excl))
    return out
