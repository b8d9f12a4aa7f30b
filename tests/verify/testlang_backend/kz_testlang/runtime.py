"""The toy language's runtime: `kernel` wraps a function; every call goes through `launch`, which the worker hook
counts as one of the candidate's own kernel launches."""

from __future__ import annotations


class Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__

    def __call__(self, *args):
        return launch(self, *args)


def kernel(fn) -> Kernel:
    return Kernel(fn)


def launch(k: Kernel, *args):
    return k.fn(*args)
