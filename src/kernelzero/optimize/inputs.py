"""The module to optimise, as a `Task`: a task-format file, or an `nn.Module` file plus an inputs function.

    task = load_module("my_module.py")                                    # Model, get_inputs, get_init_inputs
    task = load_module("block.py", model="MyBlock", inputs="example_inputs")   # any nn.Module + an inputs function

A task-format file (KernelBench's: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`) is taken as it
is. Any other file names its module class (`model`; default: `Model`, or the file's only `nn.Module` subclass) and a
function returning the forward inputs (`inputs`; default `get_inputs`): a list or tuple of tensors, or one tensor.
Constructor arguments come from `init_inputs` (default `get_init_inputs`); without one the class must construct
with no arguments. Such a file gets a short adapter appended (`Model = MyBlock` and the two contract functions), so
the Coder and the verifier see one task-format module; the user's code above it is unchanged.

Everything here reads the file's syntax tree only: the caller's process never runs the module (the contract check,
`tasks.check_tasks`, runs it in a child process). What is missing is named in a `ModuleInputError`, with the flag
that supplies it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelzero.tasks import load_suite
from kernelzero.types import Task

ADAPTER_MARK = "# -- added by `kernelzero optimize`"


class ModuleInputError(ValueError):
    """The file cannot be made a task; the message says what is missing and how to supply it."""


def _is_module_class(node: ast.ClassDef) -> bool:
    """A class whose bases name `Module` (nn.Module, torch.nn.Module, Module)."""
    return any(ast.unparse(b).split(".")[-1] == "Module" for b in node.bases)


def _top_level(tree: ast.Module) -> tuple[dict[str, ast.ClassDef], dict[str, ast.FunctionDef], set[str]]:
    """(classes, functions, every other name assigned) at the module's top level."""
    classes, functions, names = {}, {}, set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return classes, functions, names


def _required_init_args(node: ast.ClassDef) -> list[str]:
    """The constructor's parameters without defaults (self excluded); [] when the class defines no __init__."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            args = item.args
            positional = args.posonlyargs + args.args
            required = positional[1 : len(positional) - len(args.defaults)]
            kw_required = [a for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
            return [a.arg for a in required + kw_required]
    return []


def _pick_model(path: Path, classes: dict[str, ast.ClassDef], model: str | None) -> str:
    modules = [name for name, node in classes.items() if _is_module_class(node)]
    if model is not None:
        if model not in classes:
            raise ModuleInputError(
                f"{path}: no class {model!r}; nn.Module classes defined there: {', '.join(modules) or '(none)'}"
            )
        return model
    if "Model" in classes:
        return "Model"
    if len(modules) == 1:
        return modules[0]
    if not modules:
        raise ModuleInputError(f"{path}: defines no nn.Module class (a class whose base is nn.Module) to optimise")
    raise ModuleInputError(
        f"{path}: defines no class Model and {len(modules)} nn.Module classes ({', '.join(modules)}): "
        "pass --model-class NAME to say which one to optimise"
    )


def _pick_function(path: Path, functions: dict, names: set[str], wanted: str | None, default: str, what: str) -> str:
    name = wanted or default
    if name in functions or (wanted is None and name in names):
        return name
    found = ", ".join(sorted(functions)) or "(none)"
    flag = "--inputs" if default == "get_inputs" else "--init-inputs"
    if wanted is not None:
        raise ModuleInputError(f"{path}: no function {wanted!r} ({what}); functions defined there: {found}")
    raise ModuleInputError(
        f"{path}: defines no {default}() ({what}): add it, or pass {flag} FUNC naming a function of the file "
        f"that returns them (functions defined there: {found})"
    )


def adapter(model: str, inputs: str, init_inputs: str | None) -> str:
    """The lines appended to a non-task-format file so it defines Model, get_inputs and get_init_inputs."""
    lines = ["", "", f"{ADAPTER_MARK}: the KernelBench contract over the module above --", "import torch as _kz_torch"]
    if model != "Model":
        lines.append(f"Model = {model}")
    if inputs != "get_inputs":
        lines += [
            "",
            "",
            "def get_inputs():",
            f"    inputs = {inputs}()",
            "    return [inputs] if isinstance(inputs, _kz_torch.Tensor) else list(inputs)",
        ]
    if init_inputs != "get_init_inputs":
        body = "[]" if init_inputs is None else f"list({init_inputs}())"
        lines += ["", "", "def get_init_inputs():", f"    return {body}"]
    return "\n".join(lines) + "\n"


def load_module(
    path: str | Path,
    model: str | None = None,
    inputs: str | None = None,
    init_inputs: str | None = None,
) -> Task:
    """The file as a Task named after its stem (see the module docstring); ModuleInputError says what is missing."""
    path = Path(path)
    if not path.is_file():
        raise ModuleInputError(f"{path}: no such file")
    if path.suffix != ".py":
        raise ModuleInputError(f"{path}: expected a Python file (.py) defining an nn.Module")
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ModuleInputError(f"{path}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    classes, functions, names = _top_level(tree)
    model_name = _pick_model(path, classes, model)
    inputs_name = _pick_function(path, functions, names, inputs, "get_inputs", "the forward inputs")
    init_name: str | None = None
    if init_inputs is not None or "get_init_inputs" in functions or "get_init_inputs" in names:
        init_name = _pick_function(path, functions, names, init_inputs, "get_init_inputs", "the constructor arguments")
    else:
        required = _required_init_args(classes[model_name])
        if required:
            raise ModuleInputError(
                f"{path}: {model_name}.__init__ takes {', '.join(required)} and the file defines no "
                "get_init_inputs(): add it (returning the constructor arguments as a list), or pass --init-inputs FUNC"
            )
    if (model_name, inputs_name, init_name) == ("Model", "get_inputs", "get_init_inputs"):
        task = load_suite(path).tasks[0]  # task format: taken as it is
        return Task(name=path.stem, source=task.source, suite="optimize", tie_prone=task.tie_prone)
    if ADAPTER_MARK in source:
        raise ModuleInputError(f"{path}: already holds a `kernelzero optimize` adapter; pass the original file")
    return Task(name=path.stem, source=source + adapter(model_name, inputs_name, init_name), suite="optimize")
