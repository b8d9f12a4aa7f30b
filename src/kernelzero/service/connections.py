"""Bounds on the service's connections: how many are open, how long one may idle, how long a request may take
to arrive. `kernelzero serve` hands uvicorn the protocol this module makes.

    limits = Limits(max_connections=1024, idle_s=5.0, read_s=30.0)
    uvicorn.run(app, http=guarded_protocol(limits), timeout_keep_alive=int(limits.idle_s), ...)

Why: uvicorn's HTTP/1.1 protocol (h11, uvicorn 0.54 as in constraints.txt) accepts every connection, and its
only timer (`timeout_keep_alive`) starts after a response: a connection that sends nothing, or its headers
or body a byte at a time, stays open for ever. A hostile client held 22,000 such connections; each holds a
descriptor and memory, and past the process's descriptor limit nothing else (a judge's pipe, the database)
can open one.

What holds, per server:
- At most `max_connections` are open. A new connection past the cap closes the open one that has waited
  longest for the first byte of a request (an idle one), so idle connections cannot lock clients out; when
  none is idle the new connection is closed at once.
- A connection must send the first byte of a request within `idle_s` of connecting (or of its previous
  response), and the whole request, headers and body, within `read_s` of that moment; else it is closed
  without an answer. The time the app then takes to answer is not counted.
- Headers are at most `MAX_HEADER_BYTES` (h11 answers 400 past it); the body's size is the app's bound.
Not here: the body's size and parsing (service/http.py, service/schema.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEADER_BYTES = 16 * 1024  # the request line and headers
RECEIVED = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)  # states of the client's side once its request is in


@dataclass(frozen=True)
class Limits:
    max_connections: int = 1024  # open at once; past it the longest-idle one is closed, else the new one
    idle_s: float = 5.0  # from connecting, or from the previous response, to the first byte of a request
    read_s: float = 30.0  # from the same moment to the last byte of the request (headers and body)

    def __post_init__(self):
        if self.max_connections < 1 or not (0 < self.idle_s <= self.read_s):
            raise ValueError(f"want max_connections >= 1 and 0 < idle_s <= read_s, got {self}")


def guarded_protocol(limits: Limits) -> type[H11Protocol]:
    """An h11 protocol class for one server, bounded by `limits` (see the module docstring). Long because the class
    is defined in here, closing over `limits`: each of its methods is short."""

    class Guarded(H11Protocol):
        waiting: dict[Guarded, None] = {}  # connections waiting for a request's first byte, oldest first
        refused = 0  # connections closed at once or evicted by the cap (for the tests and the log)

        def connection_made(self, transport) -> None:
            self._timer, self._request_by = None, 0.0
            full = len(self.connections) >= limits.max_connections
            super().connection_made(transport)
            if full:
                oldest = next(iter(self.waiting), None)
                type(self).refused += 1
                if oldest is None:
                    transport.close()
                    return
                oldest._close()
            self._wait()

        def _wait(self) -> None:
            """Wait for a request: its first byte within idle_s, all of it within read_s."""
            self.waiting.pop(self, None)
            self.waiting[self] = None
            self._request_by = time.monotonic() + limits.read_s
            self._arm(limits.idle_s)

        def _arm(self, delay: float | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(max(delay, 0.0), self._close) if delay is not None else None

        def _close(self) -> None:
            self.waiting.pop(self, None)
            self._arm(None)
            if not self.transport.is_closing():
                self.transport.close()

        def _track(self) -> None:
            """After bytes arrive or a response ends: a request begun is off the idle list and on the read
            deadline; a request fully received stops the clock."""
            if self.transport.is_closing():
                return
            if self.conn.their_state in RECEIVED:
                self.waiting.pop(self, None)
                self._arm(None)
            elif self in self.waiting and (self.conn.their_state is not h11.IDLE or self.conn.trailing_data[0]):
                del self.waiting[self]  # a request has begun: the read deadline now
                self._arm(self._request_by - time.monotonic())

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._wait()
            super().on_response_complete()  # may handle a pipelined request at once
            self._track()

        def connection_lost(self, exc) -> None:
            self.waiting.pop(self, None)
            self._arm(None)
            super().connection_lost(exc)

    return Guarded
