"""The local pool's GPU slots (service/slots.py): a slot given back goes first to a waiting request of its own group
on the same GPU, waiting groups spread over the slots by how many each has in flight, distinct groups go in any
order, and a waiter that gives way is never left waiting for nothing."""

from __future__ import annotations

import threading
import time

from kernelzero.service.slots import GpuSlots


def _waiter(slots: GpuSlots, group, got: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: got.append((group, slots.take(group))), daemon=True)
    thread.start()
    return thread


def _settle(slots: GpuSlots, waiting: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(slots.waiting.values()) != waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(slots.waiting.values()) == waiting


def test_a_slot_given_back_goes_to_a_waiting_request_of_its_group_on_its_gpu():
    slots = GpuSlots([0, 1], per_gpu=1, unhealthy=set())
    a_gpu, b_gpu = slots.take("a"), slots.take("b")
    assert {a_gpu, b_gpu} == {0, 1}
    got: list = []
    threads = [_waiter(slots, "c", got)]  # came first, and its group has none in flight
    _settle(slots, 1)
    threads.append(_waiter(slots, "a", got))
    _settle(slots, 2)
    slots.give(a_gpu, "a")
    threads[1].join(5)
    assert got == [("a", a_gpu)]  # the hand-over: "c" waited though it came first and has fewer in flight
    slots.give(a_gpu, "a")
    threads[0].join(5)
    assert got[1] == ("c", a_gpu) and sum(slots.waiting.values()) == 0


def test_waiting_groups_spread_over_the_slots_and_each_slot_continues_its_group():
    slots = GpuSlots([0], per_gpu=4, unhealthy=set())
    slots.in_flight[0] = 4  # full: eight requests of two groups wait, all of "x" before any of "y"
    got: list = []
    threads = [_waiter(slots, g, got) for g in "xxxx"] + [_waiter(slots, g, got) for g in "yyyy"]
    _settle(slots, 8)
    for _ in range(4):
        slots.give(0, None)
    deadline = time.monotonic() + 5
    while len(got) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert sorted(g for g, _ in got) == ["x", "x", "y", "y"]  # two slots each, not four of "x"
    slots.give(0, "y")
    deadline = time.monotonic() + 5
    while len(got) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert got[4][0] == "y"  # "y" gave the slot back: a "y" takes it though "x" has as many in flight
    for g in "xxy":
        slots.give(0, g)
    for thread in threads:
        thread.join(5)
    assert len(got) == 8 and not any(t.is_alive() for t in threads)


def test_distinct_groups_take_free_slots_at_once_and_no_gpu_left_ends_the_wait():
    slots = GpuSlots([0, 1], per_gpu=2, unhealthy=set())
    taken = [slots.take(i) for i in range(4)]  # four distinct tasks: none waits for another
    assert sorted(taken) == [0, 0, 1, 1]
    got: list = []
    waiter = _waiter(slots, "late", got)
    _settle(slots, 1)
    slots.unhealthy.update({0, 1})
    slots.out(0)
    waiter.join(5)
    assert got == [("late", None)]
