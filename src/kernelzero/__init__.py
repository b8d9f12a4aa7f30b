"""kernelzero: train and evaluate LLMs that write GPU kernels.

See README.md for the commands; the stages are documented in their packages' docstrings.
"""

__version__ = "0.1.0"
