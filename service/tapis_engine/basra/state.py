"""Basra data: options, the state, the action, the events and the view (all frozen, plain data).

Sides: with 4 players the two teams (seats 0+2 are side 0, seats 1+3 side 1); with 2 or 3 players
each seat is its own side (side = seat). Per-side tuples are indexed by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tapis_engine.cards import Card

EGYPTIAN = "egyptian"
LEBANESE = "lebanese"
IRAQI = "iraqi"
VARIANTS = (EGYPTIAN, LEBANESE, IRAQI)
TARGETS = (101, 151)


@dataclass(frozen=True, slots=True)
class BasraOptions:
    """``variant``: egyptian (default), lebanese or iraqi; ``two_card_jack_basra``: a jack taking
    exactly one or two cards is a basra (not with lebanese); ``target``: 101 (default) or 151."""

    variant: str = EGYPTIAN
    two_card_jack_basra: bool = False
    target: int = 101


class PlayCard(NamedTuple):
    """Play ``card`` from the hand. ``capture`` names the floor cards taken (sorted, () for none);
    None lets the service choose (the complete capture with the most points, then the smallest
    in card order)."""

    card: Card
    capture: tuple[Card, ...] | None = None


def sides_of(seats: int) -> int:
    """How many sides play: two teams with 4 seats, else one per seat."""
    return 2 if seats == 4 else seats


def side_of(seats: int, seat: int) -> int:
    """The side (team or player) that ``seat`` belongs to."""
    return seat % 2 if seats == 4 else seat


def seats_of_side(seats: int, side: int) -> tuple[int, ...]:
    """The seats of one side, in seat order."""
    return (side, side + 2) if seats == 4 else (side,)


class BasraState(NamedTuple):
    """The whole game. Hidden: ``hands`` (but the owner's), ``stock``, ``stacked``.

    A named tuple rather than a dataclass: it is built once per action, and cheaply.
    """

    seats: int
    options: BasraOptions
    rng: int
    """The PRNG state (SplitMix64), used to shuffle each deal."""
    deal: int
    """The deal in play, 1-based."""
    dealer: int
    playing: tuple[int, ...]
    """The seats playing this deal (all, except in a tie deal among some sides)."""
    hands: tuple[tuple[Card, ...], ...]
    """Per seat, in the order dealt."""
    floor: tuple[Card, ...]
    """Face-up cards in the order they were laid."""
    stock: tuple[Card, ...]
    """Top card first."""
    captured: tuple[tuple[Card, ...], ...]
    """Per side, this deal's capture pile (face down; captures were public)."""
    basras: tuple[int, ...]
    """Per side, this deal's basras."""
    scores: tuple[int, ...]
    """Per side, the game total of the finished deals."""
    to_move: int | None
    last_capturer: int | None
    """The seat that captured last in this deal."""
    winners: tuple[int, ...] = ()
    """Winning sides once the game is over."""
    over: bool = False
    stacked: tuple[Card, ...] = ()
    """Remaining stacked deck (52 cards per deal to come), else empty: deals are shuffled."""


# --- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandsDealt:
    """Four cards to each playing seat. ``hands[seat]`` is None where the recipient may not see it
    (after ``redact``, only the recipient's own hand is given)."""

    deal: int
    dealer: int
    round: int
    """Hands of this deal so far, 1-based."""
    hand_sizes: tuple[int, ...]
    stock_size: int
    hands: tuple[tuple[Card, ...] | None, ...]


@dataclass(frozen=True, slots=True)
class FloorLaid:
    """The dealer laid ``laid`` face up; jacks and 7♦ were ``buried`` in the stock (in that
    order) and replaced from the top, giving ``floor``."""

    laid: tuple[Card, ...]
    buried: tuple[Card, ...]
    floor: tuple[Card, ...]
    stock_size: int


@dataclass(frozen=True, slots=True)
class CardPlayed:
    """``seat`` played ``card``; with no capture it stays on the floor."""

    seat: int
    card: Card
    hand_size: int


@dataclass(frozen=True, slots=True)
class Captured:
    """``seat``'s card took ``taken`` from the floor; both go to the side's pile."""

    seat: int
    side: int
    card: Card
    taken: tuple[Card, ...]
    captured_counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BasraScored:
    """The capture was a basra. ``how``: "sum" (a number card), "rank" (Q or K), "seven" (the 7♦
    sweep), "jack" or, in the Lebanese variant, "match"."""

    seat: int
    side: int
    how: str
    basras: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LeftoverSwept:
    """End of the deal: the floor goes to the last capturer (not a basra)."""

    seat: int | None
    side: int | None
    cards: tuple[Card, ...]
    captured_counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SideScore:
    """One side's line of a deal's score sheet."""

    side: int
    seats: tuple[int, ...]
    cards: int
    most_cards: int
    ten_of_diamonds: int
    two_of_clubs: int
    aces: int
    jacks: int
    basras: int
    basra_points: int
    points: int
    """This deal's points."""
    total: int
    """The game total after this deal."""


@dataclass(frozen=True, slots=True)
class DealScored:
    """The score sheet of a finished deal (one line per side that played it)."""

    deal: int
    lines: tuple[SideScore, ...]
    scores: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TieDeal:
    """Several sides reached the target with the same highest total: they play another deal."""

    sides: tuple[int, ...]
    seats: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BasraEnded:
    """The game is over: ``winners`` are the winning sides, ``winning_seats`` their seats."""

    winners: tuple[int, ...]
    winning_seats: tuple[int, ...]
    scores: tuple[int, ...]


# --- view ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BasraView:
    """What one seat (or a spectator, ``seat`` None, ``hand`` None) sees of the table."""

    seat: int | None
    hand: tuple[Card, ...] | None
    floor: tuple[Card, ...]
    stock_size: int
    hand_sizes: tuple[int, ...]
    captured_counts: tuple[int, ...]
    basras: tuple[int, ...]
    scores: tuple[int, ...]
    dealer: int
    to_move: int | None
    deal: int
    playing: tuple[int, ...]
    last_capturer: int | None
    variant: str
    two_card_jack_basra: bool
    target: int
    teams: bool
    winners: tuple[int, ...]
    over: bool
