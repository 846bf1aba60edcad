"""Cards as the screens write them: ``10♥``, ``Q♠``, ``Joker`` (``D♠`` in French: valet,
dame, roi); red suits in red."""

from __future__ import annotations

from collections.abc import Iterable

from tapis.v1.cards_pb2 import Card
from tapis_clients.i18n import N_, _

RANKS = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9", 10: "10",
         # The court cards' letters: in French V (valet), D (dame), R (roi).
         11: N_("J"), 12: N_("Q"), 13: N_("K"), 14: N_("A"), 15: N_("Joker")}
SUITS = {1: "♣", 2: "♦", 3: "♥", 4: "♠", 0: ""}
RED = {2, 3}


def rank_text(rank: int) -> str:
    """A rank's letter or number in the reader's language."""
    shown = RANKS.get(rank)
    return "?" if shown is None else _(shown) if rank > 10 else shown


def card_text(card: Card) -> str:
    """``10♥``, ``Q♠``, ``Joker``."""
    return rank_text(card.rank) + SUITS.get(card.suit, "")


def card_markup(card: Card) -> str:
    """The card as rich markup, red suits in red."""
    text = card_text(card)
    colour = "red" if card.suit in RED else ("magenta" if card.rank == 15 else "bold")
    return f"[{colour}]{text}[/]"


def cards_markup(cards: Iterable[Card], empty: str = "—") -> str:
    """Cards side by side (``empty`` for none)."""
    shown = " ".join(card_markup(card) for card in cards)
    return shown or empty


def cards_text(cards: Iterable[Card], joiner: str = "+") -> str:
    """Cards as plain text, ``3♣+4♥``."""
    return joiner.join(card_text(card) for card in cards)
