"""A toy kernel language for tests/verify/test_backend_registry.py: a "kernel" is a Python function decorated with
`@kz_testlang.kernel`, and launching it runs the function. It exists to prove that a backend is one folder and one
registry entry: the verifier runs it with no change of its own.
"""

from kz_testlang.runtime import Kernel, kernel, launch

__all__ = ["Kernel", "kernel", "launch"]
