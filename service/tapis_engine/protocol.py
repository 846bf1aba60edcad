"""The one protocol every game implements (after OpenSpiel's generic game API).

A game is plain data plus pure functions. ``Rules`` objects hold no per-game state: every call
takes the state and returns a new one (the input is never mutated). Randomness comes from the
seeded PRNG kept inside the state (``tapis_engine.rng``); time never enters the rules (turn
timers live in ``tapis_engine.table``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tapis_engine.cards import Card

State = TypeVar("State")
Action = TypeVar("Action")
Options = TypeVar("Options")

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class GameSetup(Generic[Options]):
    """Everything a game needs to start: seat count, seed, options and an optional stacked deck.

    ``stacked_deck`` is the card order to deal instead of a shuffle, top card first.
    ``stacked_first`` fixes the game's random choice of who starts (its first player or first
    dealer) when a deck is stacked; ``None`` leaves it to the seeded PRNG.
    ``salt`` is the table's secret for the seed commitments (``tapis_engine.fairness``), and
    ``seed_chosen`` says the creator chose the seed (the rules ignore both).
    """

    seats: int
    seed: int
    options: Options
    stacked_deck: tuple[Card, ...] | None = None
    stacked_first: int | None = None
    salt: str = ""
    seed_chosen: bool = False

    @property
    def deal_chosen(self) -> bool:
        """The creator chose the deal (a seed or a stacked deck) rather than the server."""
        return self.seed_chosen or self.stacked_deck is not None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a finished game ended. ``winners`` empty means a draw; ``scores`` has one per seat."""

    winners: tuple[int, ...]
    scores: tuple[int, ...]
    summary: str


class Rules(Protocol[State, Action, Options]):
    """The rules of one game kind. Stateless; all methods are pure."""

    kind: str
    """Stable identifier (``"war"``): the registry's key, kept in snapshots and journals."""
    min_seats: int
    max_seats: int
    bot_takes_over_on_timeout: bool
    """True when a timed-out seat stays with the bot until reclaimed (War); else one move only."""
    bot_strategies: tuple[str, ...]
    """Names of the server-side bots, the first being the default (e.g. ``("random", ...)``)."""
    hides_events: bool
    """False when ``redact`` gives every event back unchanged (no event ever carries a hidden
    card): every recipient then sees every event alike."""

    def default_options(self) -> Options:
        """The options a game gets when the creator names none."""
        ...

    def check_setup(self, setup: GameSetup[Options]) -> None:
        """Raise ``RuleError`` (INVALID) if the seat count, options or stacked deck are wrong."""
        ...

    def start(self, setup: GameSetup[Options]) -> tuple[State, list[Any]]:
        """Deal and return the first state and its events."""
        ...

    def to_act(self, state: State) -> frozenset[int]:
        """The seats whose move the game is waiting for (empty when over)."""
        ...

    def legal_actions(self, state: State, seat: int) -> Sequence[Action]:
        """The seat's legal actions now, in a deterministic order (may be empty)."""
        ...

    def apply(self, state: State, seat: int, action: Action) -> tuple[State, list[Any]]:
        """Validate then apply; raise ``RuleError`` and change nothing when illegal."""
        ...

    def outcome(self, state: State) -> Outcome | None:
        """The result once the game is over, else None."""
        ...

    def view(self, state: State, seat: int | None) -> Any:
        """What ``seat`` (None: a spectator) sees at the table; never a hidden card."""
        ...

    def redact(self, event: Any, seat: int | None) -> Any:
        """The event as ``seat`` (None: a spectator) may see it."""
        ...

    def bot_action(self, state: State, seat: int, strategy: str, seed: int) -> Action | None:
        """A server bot's move for ``seat`` now, or None if it has nothing to do.

        ``seed`` is fresh for every call (derived by the table); the bot may only use the
        information ``seat`` could see (its view), never hidden cards.
        """
        ...

    def encode_state(self, state: State) -> JSON:
        """A JSON-safe dict (no pickle) that ``decode_state`` turns back into an equal state."""
        ...

    def decode_state(self, data: Mapping[str, Any]) -> State:
        """Inverse of ``encode_state``."""
        ...

    def encode_action(self, action: Action) -> JSON:
        """A JSON-safe dict for the action journal."""
        ...

    def decode_action(self, data: Mapping[str, Any]) -> Action:
        """Inverse of ``encode_action``."""
        ...

    def encode_options(self, options: Options) -> JSON:
        """A JSON-safe dict for snapshots."""
        ...

    def decode_options(self, data: Mapping[str, Any]) -> Options:
        """Inverse of ``encode_options``."""
        ...
