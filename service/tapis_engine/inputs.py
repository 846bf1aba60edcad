"""A table's inputs: what the journal records, one per accepted request or server decision.

``table.step`` applies one (``tapis_engine.table`` names them too: ``tbl.Act``);
``table_codec`` writes and reads them as journal records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tapis_engine.frozen import fast_init


@dataclass(frozen=True, slots=True)
class Claim:
    seat: int


@dataclass(frozen=True, slots=True)
class Act:
    seat: int
    action: Any

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(self, seat: int, action: Any) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "action", action)


fast_init(Act)


@dataclass(frozen=True, slots=True)
class BotMove:
    """A bot-controlled seat moves; the move is recomputed from the state (deterministic)."""

    seat: int


@dataclass(frozen=True, slots=True)
class Timeout:
    seat: int


@dataclass(frozen=True, slots=True)
class Reclaim:
    seat: int


@dataclass(frozen=True, slots=True)
class NextGame:
    seat: int


@dataclass(frozen=True, slots=True)
class Replace:
    """A person's seat changes holder (the service decides who): the seat is taken (a free
    one too) and a bot plays it until its new holder reclaims it (``Reclaim``)."""

    seat: int


@dataclass(frozen=True, slots=True)
class Abandon:
    """The server ends the table as abandoned (nobody acted for too long; the service decides
    when, from its clock: the time is an input like any other)."""

    seat: int = -1
    """No seat: the server's own input."""


@dataclass(frozen=True, slots=True)
class Resume:
    """The server serves the table again after a time nobody could play at it (a restart, a
    store outage healed, another node taking it over): every person it awaits gets at least one
    whole turn from now (the service decides when, from its clock)."""

    seat: int = -1
    """No seat: the server's own input."""


Input = Claim | Act | BotMove | Timeout | Reclaim | NextGame | Replace | Abandon | Resume
