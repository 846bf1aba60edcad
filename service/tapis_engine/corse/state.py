"""Bataille Corse data: options, state, actions, events and the per-seat view.

All frozen dataclasses. Decks are top card first; the pile is bottom card first, and its top
``face_up`` cards are the ones flipped face up since it was last taken (face-down penalty cards
only ever go to the bottom).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tapis_engine.cards import Card
from tapis_engine.corse.combinations import ALL_COMBINATIONS

DEFAULT_FLIP_CAP = 10_000
MAX_FLIP_CAP = 1_000_000

IN_PLAY = "in_play"
ELIMINATED = "eliminated"
OUT = "out"
"""Seat statuses: in play, eliminated (may re-enter by slapping), out for good."""

CHALLENGE = "challenge"
LAST_IN_PLAY = "last_in_play"
FLIP_CAP = "flip_cap"
"""Why a pile is won (besides a combination's name) and why a game ends."""

STRIKES_OUT = 3
PENALTY_CARDS = 3


@dataclass(frozen=True, slots=True)
class CorseOptions:
    """Which slap combinations are on (all six by default) and the cap on cards flipped."""

    combinations: frozenset[str] = field(default_factory=lambda: frozenset(ALL_COMBINATIONS))
    flip_cap: int = DEFAULT_FLIP_CAP


@dataclass(frozen=True, slots=True)
class CorseState:
    """A Bataille Corse game in progress (or over: ``end`` is set)."""

    decks: tuple[tuple[Card, ...], ...]
    """Each seat's deck, top card first (hidden from everyone)."""
    pile: tuple[Card, ...]
    """The central pile, bottom card first."""
    face_up: int
    """How many of the pile's top cards were flipped face up since it was last taken."""
    sequence: int
    """Cards flipped face up so far in the game, draws included: the top card's number."""
    turn: int | None
    """The seat due to flip (the one owing tries during a challenge); None once over."""
    challenger: int | None
    """Who flipped the last J/Q/K/A/Joker of the challenge in progress, if any."""
    tries: int
    """Tries left to the seat due to flip during a challenge (0 without one)."""
    statuses: tuple[str, ...]
    strikes: tuple[int, ...]
    """False slaps made while eliminated (three: out for good)."""
    rng: int
    combinations: frozenset[str]
    flip_cap: int
    winner: int | None = None
    end: str | None = None
    """Why the game ended: "last_in_play" or "flip_cap"; None while in play."""

    @property
    def top_sequence(self) -> int | None:
        """The sequence number of the pile's top card when it is face up, else None."""
        return self.sequence if self.face_up else None

    def face_up_cards(self) -> tuple[Card, ...]:
        """The face-up cards flipped since the pile was last taken, oldest first."""
        return self.pile[len(self.pile) - self.face_up:] if self.face_up else ()


# --- actions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Flip:
    """Flip the top card of your deck (cardless and owing tries: draw from the next deck)."""


@dataclass(frozen=True, slots=True)
class Slap:
    """Slap the pile, naming the sequence number of the top card you saw."""

    pile_sequence: int


CorseAction = Flip | Slap


# --- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dealt:
    deck_sizes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CardFlipped:
    """``seat`` flipped ``card`` face up as number ``sequence``; ``drawn_from`` when it was
    drawn at random from that seat's deck during a challenge."""

    seat: int
    card: Card
    sequence: int
    drawn_from: int | None = None


@dataclass(frozen=True, slots=True)
class ChallengeStarted:
    challenger: int
    tries: int
    owes: int | None


@dataclass(frozen=True, slots=True)
class ChallengePassed:
    """``owes`` answered ``previous``'s challenge: ``challenger`` now challenges the next."""

    challenger: int
    previous: int
    tries: int
    owes: int | None


@dataclass(frozen=True, slots=True)
class PileWon:
    """``seat`` took ``cards`` cards; ``reason`` is a combination's name, "challenge" or
    "last_in_play"."""

    seat: int
    reason: str
    cards: int
    deck_sizes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FalseSlap:
    """A slap with no combination: ``penalty_cards`` went face down under the pile."""

    seat: int
    penalty_cards: int
    strikes: int
    pile_size: int


@dataclass(frozen=True, slots=True)
class Eliminated:
    seat: int


@dataclass(frozen=True, slots=True)
class Reentered:
    seat: int


@dataclass(frozen=True, slots=True)
class OutForGood:
    seat: int


@dataclass(frozen=True, slots=True)
class CorseEnded:
    winner: int | None
    reason: str
    deck_sizes: tuple[int, ...]


# --- view -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorseView:
    """What anyone sees at the table: every face-up card since the pile was last taken."""

    pile_top: tuple[Card, ...]
    """The face-up cards since the pile was last taken, oldest first, newest last."""
    pile_size: int
    top_sequence: int | None
    deck_sizes: tuple[int, ...]
    turn: int | None
    challenger: int | None
    tries_left: int
    owes: int | None
    statuses: tuple[str, ...]
    strikes: tuple[int, ...]
    flips: int
    flip_cap: int
    combinations: tuple[str, ...]
    winner: int | None
    end: str | None
