"""La bataille des boutons as data: colours, options, actions, state, events and the view.

Buttons are counted, never named one by one: a ``Counts`` tuple holds how many buttons of each
colour of ``ALL_COLOURS`` (index = colour) a place holds. The reserve colour is always last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tapis_engine.cards import ACE, JACK, KING, QUEEN, SUITS, TEN, Card, piquet_deck

COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple")
"""The player colours, in the order they come into play (4, 6 or 8 for 2, 3 or 4 players)."""
RESERVE = "reserve"
"""The reserve's own colour (one button per round)."""
ALL_COLOURS = (*COLOURS, RESERVE)
RESERVE_INDEX = len(COLOURS)
COLOUR_INDEX = {name: index for index, name in enumerate(ALL_COLOURS)}
BUTTONS_PER_COLOUR = 4
BETS_PER_PLAYER = 4
DEFAULT_ROUNDS = 6
MAX_ROUNDS = 100

LAID_OUT_RANKS = (JACK, QUEEN, KING, TEN)
"""The rank each seat lays out: seat 0 jacks, 1 queens, 2 kings, 3 tens."""
OWNER_OF_RANK = {rank: seat for seat, rank in enumerate(LAID_OUT_RANKS)}
SUIT_INDEX = {suit: index for index, suit in enumerate(SUITS)}
ACE_OF_HEARTS = Card(ACE, "H")
BLACK_ACES = (Card(ACE, "C"), Card(ACE, "S"))
DECK_B = tuple(card for card in piquet_deck() if card != Card(ACE, "D"))
"""Deck B: the 32 piquet cards without the ace of diamonds (31 cards)."""

Counts = tuple[int, ...]
NO_BUTTONS: Counts = (0,) * len(ALL_COLOURS)

# Phases.
BETTING = "betting"
DRAWING = "drawing"
OVER = "over"

# Why a round ended.
SECOND_BLACK_ACE = "second_black_ace"
NO_BUTTONS_LEFT = "no_buttons_left"

# Why the game ended.
RESERVE_EMPTY = "reserve_empty"
NO_BUTTON_TO_BET = "no_button_to_bet"


def colours_in_play(seats: int) -> tuple[str, ...]:
    """The player colours used with ``seats`` players (2 per player), reserve excluded."""
    return COLOURS[: 2 * seats]


def laid_out_cards(seat: int) -> tuple[Card, ...]:
    """The four cards ``seat`` lays out, in suit order."""
    return LAID_OUT[seat]


LAID_OUT = tuple(tuple(Card(rank, suit) for suit in SUITS) for rank in LAID_OUT_RANKS)


@dataclass(frozen=True, slots=True)
class BoutonsOptions:
    """``rounds``: buttons in the reserve, one per round (default 6)."""

    rounds: int = DEFAULT_ROUNDS


# --- actions ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bet:
    """Place one of your buttons of ``colour`` on ``card``, one of your own laid-out cards."""

    colour: str
    card: Card


@dataclass(frozen=True, slots=True)
class Flip:
    """Flip the top card of deck B."""


# --- state ------------------------------------------------------------------------------------


class BoutonsState(NamedTuple):
    """A game in progress (immutable; a NamedTuple so that each action copies it cheaply)."""

    seats: int
    rounds: int
    round: int
    """The round in play, 1-based."""
    first: int
    """This round's first player (seat 0 in round 1, then the next seat each round)."""
    phase: str
    to_move: int | None
    hands: tuple[Counts, ...]
    """Each seat's own buttons by colour."""
    cards: tuple[tuple[Counts, ...], ...]
    """Buttons on each seat's laid-out cards: ``cards[seat][suit index]``."""
    centre: int
    """Reserve buttons in the centre."""
    reserve: int
    """Reserve buttons not yet moved to the centre."""
    bets_placed: int
    """Bets placed this round."""
    deck: tuple[Card, ...]
    """Deck B still to flip, top first (hidden from everyone); empty while betting."""
    black_aces: tuple[Card, ...]
    """Black aces set aside this round."""
    last_flip: Card | None
    betting_stopped: bool
    """A player had no button to bet this round: the game ends after it."""
    rng: int
    stacked: tuple[Card, ...] | None
    """The stacked orders of deck B (31 cards each; round r uses order (r - 1) mod k), or None
    to shuffle."""
    end: str | None = None


# --- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReserveToCentre:
    """A round starts: its first player moved one reserve button to the centre."""

    round: int
    first: int
    reserve_left: int
    centre: int


@dataclass(frozen=True, slots=True)
class BetPlaced:
    seat: int
    colour: str
    card: Card
    bets_placed: int


@dataclass(frozen=True, slots=True)
class BettingStopped:
    """``seat`` was due to bet with no button left: betting stops, the game ends after the round."""

    seat: int


@dataclass(frozen=True, slots=True)
class DrawStarted:
    """Deck B (31 cards) is shuffled and placed face down; ``seat`` flips first."""

    seat: int
    deck_left: int


@dataclass(frozen=True, slots=True)
class CardFlipped:
    seat: int
    card: Card
    deck_left: int


@dataclass(frozen=True, slots=True)
class ButtonsTaken:
    """``seat`` took ``buttons`` from the laid-out ``card``, or from the centre when None."""

    seat: int
    card: Card | None
    buttons: Counts


@dataclass(frozen=True, slots=True)
class BlackAceSetAside:
    seat: int
    card: Card
    black_aces_out: int


@dataclass(frozen=True, slots=True)
class RoundEnded:
    round: int
    reason: str
    game_over: bool


@dataclass(frozen=True, slots=True)
class BoutonsEnded:
    """The game is over: every seat's piles and product score; what was left counts for no one."""

    reason: str
    hands: tuple[Counts, ...]
    scores: tuple[int, ...]
    winners: tuple[int, ...]
    left_on_cards: int
    left_in_centre: int


# --- view -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaidOutCard:
    card: Card
    buttons: Counts


@dataclass(frozen=True, slots=True)
class BoutonsView:
    """Everything at a Boutons table but the order of deck B (all of it is public)."""

    seats: int
    round: int
    rounds: int
    first: int
    phase: str
    to_move: int | None
    laid_out: tuple[tuple[LaidOutCard, ...], ...]
    hands: tuple[Counts, ...]
    centre: int
    reserve: int
    black_aces: tuple[Card, ...]
    deck_left: int
    bets_placed: int
    last_flip: Card | None
    betting_stopped: bool
    scores: tuple[int, ...]
    """Each seat's product score as things stand."""
    winners: tuple[int, ...]
    """Empty until the game is over."""
    end: str | None
