"""What the clients know of one game: its names, its screen, its bot strategy. Each game module
in tapis_clients.games declares one ``ClientGame``; tapis_clients.games lists them, and the CLI,
the bot and the tests read that list (a new game is its own module and one line there)."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.console import RenderableType

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.people import Table

Strategy = Callable[[pb.GameView, Sequence[pb.Action]], pb.Action | None]


class Memory:
    """What a screen remembers of a table's events between two views (the last slap, a deal's
    score sheet, how each game ended). A game subclasses it when its screen needs more."""

    def __init__(self) -> None:
        self.end_reasons: dict[int, str] = {}
        """Game number -> why it ended, in words (from the game's own end event)."""
        self.paused: RenderableType | None = None
        """Something the reader should read before going on (a deal's scores), once."""

    def see(self, event: pb.Event, table: Table) -> None:
        """Take in one event."""

    def caption(self, table: Table) -> str:
        """A line under the board about what just happened ("" for none)."""
        return ""

    def refusal(self, reason: str, table: Table) -> str | None:
        """A refusal said better than the generic sentence, from what the events told."""
        return None

    def take_pause(self) -> RenderableType | None:
        paused, self.paused = self.paused, None
        return paused


class Follower(Protocol):
    """A bot's picture of a real-time table, kept from the event stream alone."""

    @property
    def view(self) -> pb.GameView: ...

    @property
    def version(self) -> int: ...

    def apply(self, event: pb.Event) -> None: ...

    def legal_actions(self) -> list[pb.Action]: ...


def _never(action: pb.Action) -> bool:
    return False


def _no_hint(view: pb.GameView, typed: str, table: Table) -> str | None:
    return None


def _no_menu(view: pb.GameView, actions: list[pb.Action], table: Table
             ) -> RenderableType | None:
    return None


def _alone(view: pb.GameView) -> list[list[int]]:
    return [[seat.seat] for seat in view.seats]


@dataclass(frozen=True)
class ClientGame:
    """One game as the clients see it."""

    kind: pb.GameKind.ValueType
    field: str
    """Its field in the contract's oneofs (views, actions, events, options)."""
    commands: tuple[str, ...]
    """Its names on the command line, the first one shown (``tapis play war``)."""
    title: str
    """Its name as the rules say it (the same in every language)."""
    min_size: tuple[int, int]
    """The smallest terminal (columns, rows) its screen fits."""
    board: Callable[[pb.GameView, Table], RenderableType]
    describe_action: Callable[[pb.Action, pb.GameView, Table], str]
    """A move in the menu, as said to the reader of ``view``."""
    describe_event: Callable[[pb.Event, Table], str | None]
    hotkey: Callable[[pb.Action], str | None]
    strategy: Callable[[random.Random], Strategy]
    """The reference bot's policy for this game."""
    seats: tuple[int, int]
    """The fewest and the most players a table of it seats, as its rules check them (the
    engine's ``min_seats`` and ``max_seats``: the server refuses others, INVALID_SEAT_COUNT)."""
    memory: Callable[[], Memory] = Memory
    realtime: Callable[[pb.Action], bool] = _never
    """Actions sent without ``expected_version`` (any seat, at any time: a slap)."""
    key_hint: Callable[[pb.GameView, str, Table], str | None] = _no_hint
    set_points: Callable[[pb.CreateGameRequest, int], None] | None = None
    """How ``--points`` sets the game's target (None: the game has none)."""
    add_options: Callable[[argparse.ArgumentParser], list[argparse.Action]] | None = None
    """The game's own options of ``tapis play`` and ``tapis create`` (its rules' variant),
    added to their parsers; the actions added are returned (None: the game has none)."""
    set_options: Callable[[pb.CreateGameRequest, argparse.Namespace], None] | None = None
    """How those options (and ``--points``) set the request; ValueError, in words, for a
    combination the rules refuse."""
    menu: Callable[[pb.GameView, list[pb.Action], Table], RenderableType | None] = _no_menu
    """A menu of the game's own (a grid of bets); None: the numbered list."""
    sides: Callable[[pb.GameView], list[list[int]]] = _alone
    """Who wins together (teams), for the series scoreboard."""
    follower: Callable[[pb.GameView], Follower] | None = None
    """For bots of a real-time game: a picture of the table kept from events."""
    default_turn_ms: int = 0
    """The turn timer `tapis play` sets unless told (0: none)."""
    reserved_keys: frozenset[str] = frozenset()
    """Keys the game's moves use at any time (f to flip): other screen keys avoid them."""
    reflexes: bool = False
    """Whether the computer players race the person (their speed is ``--bot-speed``)."""
