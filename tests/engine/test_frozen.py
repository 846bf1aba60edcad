"""fast_init: the same constructor as the frozen dataclass's own, only cheaper; compiled, the
hot classes' own written ``__init__``, in Python a generated one with the same signature."""

from __future__ import annotations

import dataclasses
import inspect
from types import FunctionType
from typing import Any

import pytest

from tapis_engine import table as tbl
from tapis_engine import war
from tapis_engine.frozen import fast_init
from tapis_engine.protocol import GameSetup
from tapis_service.tables import session


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: tuple[int, ...]
    c: str | None = None
    d: int = 4


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: tuple[int, ...]
    c: str | None = None
    d: int = 4


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    a: int
    b: tuple[int, ...]
    c: str | None = None
    d: int = 4

    def __init__(self, a: int, b: tuple[int, ...], c: str | None = None, d: int = 4) -> None:
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "d", d)


fast_init(Written)

FAST = [tbl.TableEvent, tbl.Act, tbl.Table, war.Laid, war.WarState, war.CardRevealed,
        war.TrickWon, session.LoggedEvent, session.Applied]


def test_it_builds_what_the_generated_constructor_builds() -> None:
    for args, kwargs in [((1, (2,)), {}), ((1, (2,), "x"), {"d": 7}), ((), {"b": (), "a": 0})]:
        plain = Plain(*args, **kwargs)
        for fast in (Fast(*args, **kwargs), Written(*args, **kwargs)):
            assert dataclasses.astuple(plain) == dataclasses.astuple(fast)
            assert repr(fast).replace(type(fast).__name__, "Plain") == repr(plain)
    for bad_args, bad_kwargs in [((), {}), ((1, 2, 3, 4, 5), {}), ((1,), {"a": 1, "b": ()}),
                                 ((1, ()), {"e": 1})]:
        for cls in (Plain, Fast, Written):
            with pytest.raises(TypeError):
                cls(*bad_args, **bad_kwargs)


def test_a_written_init_is_replaced_by_one_with_the_same_signature() -> None:
    assert Written.__init__.__code__.co_filename == "<string>"  # fast_init's
    assert inspect.signature(Written).parameters == inspect.signature(Plain).parameters

    def written(fields: str, defaults: str) -> type:
        namespace: dict[str, Any] = {}
        stores = "".join(f"    object.__setattr__(self, {n!r}, {n})\n" for n in fields.split())
        exec(f"def __init__(self, {defaults}):\n{stores}", namespace)
        cls = type("Drifted", (), {"__annotations__": {"a": int, "b": int},
                                   "b": 2, "__init__": namespace["__init__"]})
        return dataclasses.dataclass(frozen=True, slots=True)(cls)

    assert fast_init(written("a b", "a, b=2"))(1).b == 2  # the same signature: taken
    for fields, defaults in [("b a", "b=2, a=0"), ("a b", "a, b=3"), ("a b", "a, b=2.0"),
                             ("a b", "a, *, b=2"), ("a", "a")]:
        with pytest.raises(TypeError, match="not the fields"):
            fast_init(written(fields, defaults))


def test_the_instances_stay_frozen_and_replace_still_works() -> None:
    fast = Fast(1, (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    assert dataclasses.replace(fast, d=9) == Fast(1, (2,), None, 9)
    assert hash(fast) == hash(Fast(1, (2,)))


def _hot_instances() -> dict[type, Any]:
    """One instance of each hot class, as a War table's play builds them."""
    table, _ = tbl.new_table(war.RULES, GameSetup(2, 5, war.WarOptions(3)), [None, None], 0, 0)
    found: dict[type, Any] = {}
    for seat in (0, 1):
        table, events = tbl.step(war.RULES, table, tbl.Claim(seat), 0)
    while war.TrickWon not in found or war.Laid not in found:
        act = tbl.Act(min(war.RULES.to_act(table.state)), war.Reveal())
        table, events = tbl.step(war.RULES, table, act, 0)
        logged = session.LoggedEvent(events[0], table.version, (0, 1), 7)
        values = [act, table, table.state, *table.state.trick, *events, logged,
                  session.Applied(table.version, (logged,), (1, 2))]
        found.update((type(value), value) for value in values)
        found.update((type(event.body), event.body) for event in events)
    return {cls: found[cls] for cls in FAST}


def test_the_hot_classes_build_store_and_stay_frozen() -> None:
    for cls, value in _hot_instances().items():
        names = [f.name for f in dataclasses.fields(cls)]
        assert list(inspect.signature(cls).parameters) == names
        fields = {name: getattr(value, name) for name in names}
        built = cls(**fields)
        assert [getattr(built, name) for name in names] == list(fields.values())
        assert built == value == cls(*fields.values()) == dataclasses.replace(value)
        assert hash(built) == hash(value) and repr(built) == repr(value)
        assert repr(value).startswith(f"{cls.__name__}({names[0]}=")
        for name in names:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(value, name, None)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(value, name)
        assert [getattr(value, name) for name in names] == list(fields.values())


def test_compiled_the_hot_classes_keep_their_written_init_in_python_a_generated_one() -> None:
    for cls, value in _hot_instances().items():
        init = cls.__dict__["__init__"]
        compiled = "__mypyc_attrs__" in cls.__dict__  # a native class: mypyc built it
        assert isinstance(init, FunctionType) is not compiled, cls
        if compiled:
            continue  # its own, compiled: a native store per field
        assert init.__qualname__ == f"{cls.__qualname__}.__init__"
        assert init.__code__.co_filename == "<string>"  # fast_init's
        written = init.__wrapped__  # the class's own: it stores what it is given
        names = [f.name for f in dataclasses.fields(cls)]
        fresh = cls.__new__(cls)
        written(fresh, *(getattr(value, name) for name in names))
        assert fresh == value


def test_only_plain_frozen_slotted_dataclasses_are_taken() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    for cls in (NoSlots, NotFrozen, Factory, int):
        with pytest.raises(TypeError):
            fast_init(cls)
