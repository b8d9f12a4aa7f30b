"""The toy language's kernel construct: a function decorated with `kernel` (any alias)."""

import ast


def has_kernel(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if (dec.attr if isinstance(dec, ast.Attribute) else getattr(dec, "id", "")) == "kernel":
                    return True
    return False
