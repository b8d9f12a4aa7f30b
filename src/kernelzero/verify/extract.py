"""Moved to `kernelzero.coder.extract`; this path stays for the verifier and older imports."""

from kernelzero.coder.extract import extract_code  # noqa: F401
