"""The first, friendly layer: an AST policy that turns away obviously unsafe code with a reason.

It rejects imports outside a small safe list, dangerous builtins (``__import__``, ``eval``,
``open``, ``getattr``…) and private or dunder attribute access. It is a courtesy, not a wall:
string-based attribute access through a safe module (``operator.attrgetter``) gets past any
policy of this kind, so nothing else relies on it. The walls are the OS sandbox
(``isolation.py``, ``seccomp.py``) and the parent's judging (``checks.py``).
"""

from __future__ import annotations

import ast

SAFE_MODULES = frozenset(
    {
        "collections",
        "csv",
        "dataclasses",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "re",
        "statistics",
        "string",
        "typing",
        "bisect",
        "datetime",
        "textwrap",
        "operator",
        "copy",
        "random",
    }
)

FORBIDDEN_NAMES = frozenset(
    {
        "__import__",
        "__builtins__",
        "__loader__",
        "__spec__",
        "breakpoint",
        "compile",
        "delattr",
        "dir",
        "eval",
        "exec",
        "getattr",
        "globals",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "os",
        "pathlib",
        "setattr",
        "socket",
        "subprocess",
        "sys",
        "vars",
        "importlib",
        "ctypes",
        "builtins",
    }
)
FORBIDDEN_ATTRS = frozenset(
    {"builtins", "ctypes", "modules", "os", "pathlib", "socket", "subprocess", "sys", "system"}
    # Frame and code objects lead back to the trusted wrapper's globals and the real builtins.
    | {"gi_frame", "cr_frame", "ag_frame", "tb_frame", "f_back", "f_globals", "f_locals"}
    | {"f_builtins", "gi_code", "f_code", "co_consts"}
)
# Dunder names a normal program reads; everything else starting with "__" is a likely escape.
ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__doc__"})

_SAFE_BUILTIN_WORDS = (
    "abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod "
    "enumerate filter float format frozenset hash hex id int isinstance issubclass iter len list "
    "map max min next object oct ord pow print property range repr reversed round set slice "
    "sorted staticmethod str sum super tuple type zip NotImplemented Ellipsis None True False "
    "Exception BaseException ArithmeticError AssertionError AttributeError IndexError KeyError "
    "LookupError NameError NotImplementedError OverflowError RecursionError RuntimeError "
    "StopIteration TypeError ValueError ZeroDivisionError ImportError MemoryError"
)
SAFE_BUILTINS = _SAFE_BUILTIN_WORDS.split()

MAX_VIOLATIONS = 5


class _Policy(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[str] = []

    def _flag(self, node: ast.AST, message: str) -> None:
        self.violations.append(f"line {getattr(node, 'lineno', '?')}: {message}")

    def _check_module(self, node: ast.AST, name: str | None, level: int = 0) -> None:
        if level:
            self._flag(node, "relative imports are not allowed")
        elif not name or name.split(".")[0] not in SAFE_MODULES:
            self._flag(node, f"import of {name!r} is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._check_module(node, node.module, node.level)
        for alias in node.names:
            if alias.name.startswith("_") or alias.name == "*":
                self._flag(node, f"importing {alias.name!r} is not allowed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_NAMES:
            self._flag(node, f"use of {name!r} is not allowed")
        elif name.startswith("__") and name not in ALLOWED_DUNDER_NAMES:
            self._flag(node, f"use of dunder name {name!r} is not allowed")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        own = isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}
        if attr in FORBIDDEN_ATTRS:
            self._flag(node, f"attribute {attr!r} is not allowed")
        elif attr.startswith("__") or (attr.startswith("_") and not own):
            # Dunder attributes (__class__, __subclasses__, __globals__) are the classic way
            # from any object back to the real builtins.
            self._flag(node, f"private attribute {attr!r} is not allowed")
        self.generic_visit(node)


def check_policy(code: str) -> list[str]:
    """Policy violations in ``code`` (the first few), or a syntax error; empty means allowed."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"syntax error: line {exc.lineno}: {exc.msg}"]
    policy = _Policy()
    policy.visit(tree)
    return policy.violations[:MAX_VIOLATIONS]
