"""Find every refusal the code can raise, with its reason and status code, by reading its AST.

A refusal is built by one of two constructors: ``ServiceError(code, reason, message)`` (the
service) or ``RuleError(reason, message, kind)`` (the engine, ``kind`` defaulting to
PRECONDITION). A *factory* is a function that calls one of them (or another factory) with a fixed
code and passes one of its own parameters as the reason, like ``invalid_argument(reason, msg)``
or the engine's ``invalid(reason, msg)``; factories are found, not listed, so new ones are
checked too. Every call of a constructor or factory must name its reason as a string literal or
as ``Reason.X``; anything else is reported as unchecked, except in the few functions that bridge
one error type to another (``BRIDGES``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tapis_engine.errors import ErrorKind, Reason

# The engine's kinds of refusal and the code each maps to (tapis_service/observe/errors.py says
# the same; the test checks that the two agree).
KIND_CODES = {ErrorKind.INVALID: "INVALID_ARGUMENT", ErrorKind.PRECONDITION: "FAILED_PRECONDITION",
              ErrorKind.PERMISSION: "PERMISSION_DENIED",
              ErrorKind.RATE_LIMITED: "RESOURCE_EXHAUSTED"}
# Functions that turn one error into another, so their reason is not a literal by design.
BRIDGES = frozenset({("errors.py", "from_rule_error"), ("errors.py", "to_status"),
                     ("errors.py", "error_info"), ("errors.py", "from_error_info"),
                     ("errors.py", "status_message")})


@dataclass(frozen=True)
class Raised:
    """One place that builds a refusal: its reason, its status code, where."""

    reason: str
    code: str
    where: str


@dataclass(frozen=True)
class Factory:
    """A function building refusals of one code, whose reason is its parameter number ``index``
    (or keyword ``name``)."""

    code: str
    index: int
    name: str


@dataclass
class Scan:
    """What a scan found."""

    raised: list[Raised]
    unchecked: list[str]
    factories: dict[str, Factory]


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = call.args[:index + 1]
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in positional):
        return call.args[index]
    return None


def _status_code(node: ast.expr | None) -> str | None:
    """``grpc.StatusCode.X`` or ``StatusCode.X`` -> X."""
    if isinstance(node, ast.Attribute) and _name(node.value) == "StatusCode":
        return node.attr
    return None


def _kind_code(node: ast.expr | None) -> str | None:
    """``ErrorKind.X`` -> the code it maps to; no kind given -> PRECONDITION's."""
    if node is None:
        return KIND_CODES[ErrorKind.PRECONDITION]
    if isinstance(node, ast.Attribute) and _name(node.value) == "ErrorKind":
        return KIND_CODES[ErrorKind[node.attr]]
    return None


def _reason(node: ast.expr | None) -> str | None:
    """A string literal, or ``Reason.X`` (the engine's enum) -> its value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and _name(node.value) == "Reason":
        return Reason[node.attr].value
    if isinstance(node, ast.Attribute) and node.attr == "value":
        return _reason(node.value)
    return None


def _functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None,
                                                ast.Call]]:
    """Every call, with the innermost function it is in."""
    def walk(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None,
             ) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else function
            if isinstance(child, ast.Call):
                yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, None)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> list[str]:
    if function is None:
        return []
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


class _Builder:
    """How one kind of call builds a refusal: where its code and reason are."""

    def __init__(self, factories: dict[str, Factory]):
        self.factories = factories

    def code_and_reason(self, call: ast.Call) -> tuple[str | None, ast.expr | None] | None:
        """None when the call builds no refusal."""
        name = _name(call.func)
        if name == "ServiceError":
            return (_status_code(_argument(call, 0, "code")), _argument(call, 1, "reason"))
        if name == "RuleError":
            return (_kind_code(_argument(call, 2, "kind")), _argument(call, 0, "reason"))
        if name == "ErrorInfo":
            return (None, _argument(call, 99, "reason"))
        factory = self.factories.get(name or "")
        if factory is not None:
            return (factory.code, _argument(call, factory.index, factory.name))
        return None


def scan(root: Path) -> Scan:
    """Every refusal built in the Python files under ``root``."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path))
             for path in sorted(root.rglob("*.py"))}
    factories: dict[str, Factory] = {}
    builder = _Builder(factories)
    changed = True
    while changed:  # a factory of factories is found on a later pass
        changed = False
        for tree in trees.values():
            for function, call in _functions(tree):
                built = builder.code_and_reason(call)
                if function is None or built is None or function.name in factories:
                    continue
                code, reason = built
                parameters = _parameters(function)
                if code is not None and isinstance(reason, ast.Name) and reason.id in parameters:
                    index = parameters.index(reason.id)
                    if parameters and parameters[0] in ("self", "cls"):
                        index -= 1
                    factories[function.name] = Factory(code, index, reason.id)
                    changed = True
    raised: list[Raised] = []
    unchecked: list[str] = []
    for path, tree in trees.items():
        relative = path.relative_to(root)
        for function, call in _functions(tree):
            built = builder.code_and_reason(call)
            if built is None:
                continue
            code, reason_node = built
            where = f"{relative}:{call.lineno}"
            if function is not None and (path.name, function.name) in BRIDGES:
                continue
            factory = factories.get(function.name) if function is not None else None
            if factory is not None and isinstance(reason_node, ast.Name) \
                    and reason_node.id == factory.name:
                continue  # the factory's own body: its callers are checked instead
            reason = _reason(reason_node)
            if reason is None or code is None:
                unchecked.append(f"{where}: {ast.unparse(call)[:100]}")
                continue
            raised.append(Raised(reason, code, where))
    return Scan(raised, unchecked, factories)


def status_without_error_info(root: Path) -> list[str]:
    """Places that end a call with a status that may lack the ErrorInfo: ``context.abort(...)``,
    ``set_code(...)``, or ``abort_with_status`` of anything but ``to_status(...)``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            where = f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)[:100]}"
            wraps_to_status = bool(node.args) and isinstance(node.args[0], ast.Call) \
                and _name(node.args[0].func) == "to_status"
            if name in ("abort", "set_code") \
                    or (name == "abort_with_status" and not wraps_to_status):
                found.append(where)
    return found
