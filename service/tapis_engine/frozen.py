"""A cheaper constructor for the frozen dataclasses built on every move.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__`` (the
class's own ``__setattr__`` refuses): a lookup and a generic call per field, several times the
cost of a plain attribute store. ``fast_init`` gives a frozen, slotted dataclass an
``__init__`` with the same signature (defaults included) that sets each slot through its
member descriptor directly. Nothing else changes: the instances stay immutable (assignment
still raises ``FrozenInstanceError``), and equality, hashing, ``repr`` and
``dataclasses.replace`` are the dataclass's own.

It is called after the class (``fast_init(Table)``), not written as its decorator: mypyc
(``tools/compiled.py``) compiles a class with any decorator but ``@dataclass`` as a plain
Python class. A class mypyc compiled (a native class: its fields are slots of its own, each
with a descriptor) takes the same ``__init__``: mypyc leaves a dataclass's generated methods
interpreted, and the frozen one sets each field through ``object.__setattr__``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of ``cls`` (a ``@dataclass(frozen=True, slots=True)`` with
    plain fields: no ``default_factory``, no ``init=False`` nor keyword-only fields, no
    ``__post_init__``) by one that stores through the slots' descriptors (or a class mypyc
    compiled, through its fields' descriptors)."""
    params = getattr(cls, "__dataclass_params__", None)
    slotted = "__slots__" in cls.__dict__ or "__mypyc_attrs__" in cls.__dict__
    if params is None or not params.frozen or not slotted or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init takes a frozen, slotted dataclass")
    namespace: dict[str, Any] = {}
    arguments = []
    stores = []
    for index, field in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        if not field.init or field.kw_only or field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: not a plain field")
        if field.default is dataclasses.MISSING:
            arguments.append(field.name)
        else:
            namespace[f"_default_{index}"] = field.default
            arguments.append(f"{field.name}=_default_{index}")
        namespace[f"_set_{index}"] = getattr(cls, field.name).__set__
        stores.append(f"    _set_{index}(self, {field.name})\n")
    source = f"def __init__(self, {', '.join(arguments)}):\n{''.join(stores) or '    pass'}\n"
    exec(source, namespace)  # generated from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
