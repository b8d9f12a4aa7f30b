"""The local pool's GPU slots: `per_gpu` verifications in flight per healthy GPU, and who gets a slot when several
requests wait for one.

Requests come in groups: the samples of one task under one set of options (a GRPO group is 8 or 16 of them). A
serving judge keeps the task's reference process for its next request of the same group (verify/judge/serving.py),
and its `Standby` hands a request to the judge that kept its reference (verify/judge/standby.py). The slots make
that happen in the pool's order of work:

1. **Hand-over.** A slot given back by a request of group G goes first to a waiting request of G, on the same GPU
   (whose judges are the lane's), so the judge that just served G gets G again.
2. **Spread.** Otherwise the waiting request whose group has the fewest requests in flight goes first, so a window
   of waiting requests from a few groups spreads over the slots (each slot then continues its group by 1.), rather
   than one group filling every slot and the next finding no judge that kept its reference.
3. Ties: any waiter; among free slots, the GPU with the fewest in flight.

Requests of distinct groups (an evaluation's tasks) tie under both rules and go in no particular order, as before.
Nothing here changes what a verification checks: only which waiting request takes a free slot first. A waiter that
gives way is woken by every change, so one always proceeds (the one rule 1 names, or the one with the fewest in
flight under rule 2).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable

WAKE_S = 0.5  # a waiter looks again this often in any case


class GpuSlots:
    """Slots per GPU with the hand-over and spread rules (see the module docstring)."""

    def __init__(self, gpus: list[int], per_gpu: int, unhealthy: set):
        self.per_gpu = per_gpu
        self.unhealthy = unhealthy  # shared with the pool's stats: a GPU in it gets no slot
        self.cond = threading.Condition()
        self.in_flight = {g: 0 for g in gpus}
        self.running: Counter = Counter()  # group -> requests in flight
        self.waiting: Counter = Counter()  # group -> requests waiting for a slot
        self.freed: dict[int, list] = {g: [] for g in gpus}  # groups of slots given back on a GPU, not yet retaken

    def take(self, group: Hashable = None) -> int | None:
        """A slot for a request of `group` (blocks until one is free and it is this request's turn): the GPU, or
        None when no healthy GPU is left."""
        with self.cond:
            self.waiting[group] += 1
            try:
                while True:
                    healthy = [g for g in self.in_flight if g not in self.unhealthy]
                    if not healthy:
                        return None
                    gpu = self._turn(group, [g for g in healthy if self.in_flight[g] < self.per_gpu])
                    if gpu is not None:
                        self.in_flight[gpu] += 1
                        self.running[group] += 1
                        return gpu
                    self.cond.wait(WAKE_S)
            finally:
                self.waiting[group] -= 1
                self.cond.notify_all()

    def _turn(self, group: Hashable, free: list[int]) -> int | None:
        """The GPU this waiter takes now, or None (no free slot, or another waiter's turn)."""
        if not free:
            return None
        for gpu in free:  # 1. a slot its own group gave back
            if group in self.freed[gpu]:
                self.freed[gpu].remove(group)
                return gpu
        for gpu in free:  # what was given back and no one waits for is no one's
            self.freed[gpu] = [f for f in self.freed[gpu] if self.waiting[f] > 0]
        open_ = [g for g in free if self.per_gpu - self.in_flight[g] > len(self.freed[g])]
        if not open_:
            return None  # every free slot is another group's hand-over
        mine = self.running[group]
        if any(n > 0 and self.running[w] < mine for w, n in self.waiting.items() if w != group):
            return None  # 2. a group with fewer in flight goes first
        return min(open_, key=lambda g: self.in_flight[g])

    def give(self, gpu: int, group: Hashable = None) -> None:
        """Give a slot back (its request of `group` is done)."""
        with self.cond:
            self.in_flight[gpu] -= 1
            self.running[group] -= 1
            if self.waiting[group] > 0:
                self.freed[gpu].append(group)
            self.cond.notify_all()

    def out(self, gpu: int) -> None:
        """Wake every waiter: `gpu` was taken out of the pool (its health probe failed)."""
        with self.cond:
            self.freed[gpu].clear()
            self.cond.notify_all()
