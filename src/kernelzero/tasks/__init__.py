"""Task suites: loading, size overrides, hashing and the contract check.

from kernelzero.tasks import load_suite, check_tasks
suite = load_suite("kz-basic")
for result in check_tasks(suite.tasks):
    print(result.name, result.ok)
"""

from kernelzero.tasks.check import CheckOptions, check_tasks
from kernelzero.tasks.hashing import normalise_source, task_hash
from kernelzero.tasks.loaders import Suite, TaskLoadError, load_suite, resize, select
from kernelzero.tasks.sizes import SizeError, scaled_sizes, size_globals

__all__ = [
    "CheckOptions",
    "Suite",
    "SizeError",
    "TaskLoadError",
    "check_tasks",
    "load_suite",
    "normalise_source",
    "resize",
    "scaled_sizes",
    "select",
    "size_globals",
    "task_hash",
]
