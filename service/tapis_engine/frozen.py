"""A cheaper constructor for the frozen dataclasses built on every move.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__`` (the
class's own ``__setattr__`` refuses): a lookup and a generic call per field, several times the
cost of a plain attribute store. And mypyc (``tools/compiled.py``) compiles the methods written
in a class but leaves those ``dataclasses`` generates interpreted.

So a hot class writes that same ``__init__`` itself, one ``object.__setattr__(self, "name",
name)`` per field, and is then passed to ``fast_init`` (called after the class:
``fast_init(Table)``; mypyc compiles a class with any decorator but ``@dataclass`` as a plain
Python class):

- compiled by mypyc, the written ``__init__`` stays: mypyc turns each of its
  ``object.__setattr__`` calls with a literal name into a store to the instance's field, and a
  compiled caller calls it without the interpreter (about a tenth of the cost);
- in Python, ``fast_init`` replaces it by one with the same signature (checked: the fields'
  names, in order, and their defaults) that sets each slot through its member descriptor
  directly (about 60% of the written one's cost).

Nothing else changes: the instances stay immutable (assignment still raises
``FrozenInstanceError``), and equality, hashing, ``repr`` and ``dataclasses.replace`` are the
dataclass's own. A class without an ``__init__`` of its own gets the descriptor one too.
"""

from __future__ import annotations

import dataclasses
import inspect
from types import FunctionType
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Give ``cls`` (a ``@dataclass(frozen=True, slots=True)`` with plain fields: no
    ``default_factory``, no ``init=False`` nor keyword-only fields, no ``__post_init__``) an
    ``__init__`` that stores its fields without ``object.__setattr__``: its own, where mypyc
    compiled it; otherwise one storing through the slots' descriptors."""
    params = getattr(cls, "__dataclass_params__", None)
    slotted = "__slots__" in cls.__dict__ or "__mypyc_attrs__" in cls.__dict__
    if params is None or not params.frozen or not slotted or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init takes a frozen, slotted dataclass")
    own = cls.__dict__["__init__"]  # the class's own, or the one dataclasses generated
    if not isinstance(own, FunctionType):
        return cls  # compiled by mypyc: its stores are native already
    namespace: dict[str, Any] = {}
    arguments = []
    stores = []
    expected = []
    for index, field in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        if not field.init or field.kw_only or field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: not a plain field")
        if field.default is dataclasses.MISSING:
            arguments.append(field.name)
            expected.append((field.name, inspect.Parameter.empty))
        else:
            namespace[f"_default_{index}"] = field.default
            arguments.append(f"{field.name}=_default_{index}")
            expected.append((field.name, field.default))
        namespace[f"_set_{index}"] = getattr(cls, field.name).__set__
        stores.append(f"    _set_{index}(self, {field.name})\n")
    _check_signature(cls, own, expected)
    source = f"def __init__(self, {', '.join(arguments)}):\n{''.join(stores) or '    pass'}\n"
    exec(source, namespace)  # generated from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = own.__doc__
    init.__wrapped__ = own  # the written one, kept for the tests
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _check_signature(cls: type, own: Any, expected: list[tuple[str, Any]]) -> None:
    """``own`` (an ``__init__`` written in the class, or generated) takes the fields, in order,
    with their defaults: the replacement takes the same arguments."""
    parameters = list(inspect.signature(own).parameters.values())[1:]
    found = [(p.name, p.default) for p in parameters]
    plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)
    same = len(found) == len(expected) and all(
        name == want_name and type(default) is type(want) and default == want
        for (name, default), (want_name, want) in zip(found, expected, strict=True))
    if not (plain and same):
        raise TypeError(f"{cls.__name__}.__init__ takes {found}, not the fields {expected}")
