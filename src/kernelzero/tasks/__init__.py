"""Task suites: loading, size overrides, hashing and the contract check.

from kernelzero.tasks import CheckOptions, load_suite, check_tasks
from kernelzero.verify.sandbox.process import task_launcher   # task code runs only in the verifier's sandbox
suite = load_suite("kz-basic")
for result in check_tasks(suite.tasks, CheckOptions(launcher=task_launcher())):
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
