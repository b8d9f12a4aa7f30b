"""Evaluation runs: generate with a Coder, verify, score (`kernelzero eval`). See run.py; multiturn.py runs
`--turns T` (episodes in the kernel environment), config.py holds what both share."""
