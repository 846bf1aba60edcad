"""fast_init: the same constructor as the frozen dataclass's own, only cheaper."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from tapis_engine import table as tbl
from tapis_engine import war
from tapis_engine.frozen import fast_init
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


FAST = [tbl.TableEvent, tbl.Act, tbl.Table, war.Laid, war.WarState, war.CardRevealed,
        war.TrickWon, session.LoggedEvent, session.Applied]


def test_it_builds_what_the_generated_constructor_builds() -> None:
    for args, kwargs in [((1, (2,)), {}), ((1, (2,), "x"), {"d": 7}), ((), {"b": (), "a": 0})]:
        plain, fast = Plain(*args, **kwargs), Fast(*args, **kwargs)
        assert dataclasses.astuple(plain) == dataclasses.astuple(fast)
        assert repr(fast).replace("Fast", "Plain") == repr(plain)
    for bad_args, bad_kwargs in [((), {}), ((1, 2, 3, 4, 5), {}), ((1,), {"a": 1, "b": ()}),
                                 ((1, ()), {"e": 1})]:
        with pytest.raises(TypeError):
            Plain(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            Fast(*bad_args, **bad_kwargs)


def test_the_instances_stay_frozen_and_replace_still_works() -> None:
    fast = Fast(1, (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    assert dataclasses.replace(fast, d=9) == Fast(1, (2,), None, 9)
    assert hash(fast) == hash(Fast(1, (2,)))


def test_the_hot_classes_keep_their_signatures() -> None:
    for cls in FAST:
        assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
        names = [f.name for f in dataclasses.fields(cls)]
        assert list(inspect.signature(cls).parameters) == names
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cls.__new__(cls), names[0], None)


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
