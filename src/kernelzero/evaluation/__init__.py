"""Evaluation runs: generate with a Coder, verify, score (`kernelzero eval`). See run.py."""
