"""The worker's replies, authenticated: the report cannot be rewritten between the worker and the judge.

The worker's reply pipe is reachable from the
candidate's code in the same process (`/proc/self/fd`, `os.dup2`): a relay put in front of it could rewrite
launch counts, recorded ops, tamper flags and times. So once the judge hands the worker a key (`Authenticator.arm`,
in the command that first imports untrusted code, before any of it runs), every reply header is tagged with
HMAC-SHA256(key, sequence number || header bytes) (`signed_writer`), and the judge refuses a header whose tag does
not match (`recv_msg(..., auth=...)`: `ForgedReply`, the verdict `tampered`). The sequence number stops a relay from
replaying an earlier, honest reply. The header is encoded, tagged and written with functions captured when the key
arrives (the C JSON encoder, the C HMAC, `os.write`), held in a closure that only the worker's own serve loop
holds, so that rebinding `json.dumps`, `os.write` or this module's globals in the running process changes nothing
that is sent. What this holds against: any process or code that sees the bytes but not the key (a relay on the
pipe, a patched writer). What it does not: native code in the worker's process can read the key from memory, and
code that reaches the worker's objects (the static rules refuse the routes we know) can change what the worker
reports before it is tagged; tensor bytes are not tagged (the judge judges them by their values).

"""

from __future__ import annotations

import hmac
import os
import struct
from typing import Any

from kernelzero.verify.sandbox.channel import ChannelError


class ForgedReply(ChannelError):
    """A reply whose tag does not match its header: rewritten or made up between the worker and the judge."""


TAG_BYTES = 32  # HMAC-SHA256


def _tag(key: bytes, seq: int, body: bytes | bytearray | memoryview) -> bytes:
    return hmac.digest(key, seq.to_bytes(8, "little") + bytes(body), "sha256")


class Authenticator:
    """Judge side: the key of one worker and the number of the next reply; unarmed (no tags expected) until the
    judge sends the key with the command that first runs untrusted code (`WorkerProcess.send`)."""

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.seq = 0

    def arm(self, key: bytes) -> None:
        self.key, self.seq = key, 0

    def open(self, payload: bytearray) -> bytearray:
        """The header bytes of an authenticated frame; ForgedReply when the tag does not match."""
        if self.key is None:
            return payload
        tag, body = bytes(payload[:TAG_BYTES]), payload[TAG_BYTES:]
        expected = _tag(self.key, self.seq, body)
        self.seq += 1
        if len(payload) < TAG_BYTES or not hmac.compare_digest(tag, expected):
            raise ForgedReply(f"reply {self.seq - 1} does not carry the worker's tag")
        return body


class SignedWriter:
    """Worker side: where `send_msg` writes once the key has arrived (`signed_writer`); `header(dict)` encodes, tags
    and writes a header frame, `raw(bytes)` writes a tensor frame."""

    __slots__ = ("header", "raw")

    def __init__(self, header, raw) -> None:
        self.header, self.raw = header, raw


def signed_writer(fd: int, key: bytes) -> SignedWriter:
    """The worker's authenticated writer on `fd` (see the module docstring): everything it uses is captured here,
    as objects, so that later changes to modules' attributes (json, os, hmac, this module) do not reach it."""
    import _json

    def refuse(obj: Any) -> Any:
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable")

    encode = _json.make_encoder(None, refuse, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
    try:
        from _hashlib import hmac_digest as digest
    except ImportError:  # no OpenSSL: the standard library's pure-Python HMAC, captured the same way
        digest = hmac.digest
    write, pack, join, to_bytes = os.write, struct.Struct("<Q").pack, "".join, int.to_bytes
    counter = [0]

    def frame(payload: bytes | memoryview) -> None:
        view = memoryview(payload)
        write(fd, pack(len(view)))
        while view:
            view = view[write(fd, view[: 1 << 24]) :]

    def header(obj: dict) -> None:
        body = join(encode(obj, 0)).encode("ascii")
        tag = digest(key, to_bytes(counter[0], 8, "little") + body, "sha256")
        counter[0] += 1
        frame(tag + body)

    return SignedWriter(header, frame)
