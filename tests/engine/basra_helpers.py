"""Builders for Basra tests: stacked decks dealt as the rules deal them, and hand-built states."""

from __future__ import annotations

from typing import Any

from tapis_engine.basra import RULES, BasraOptions, BasraState
from tapis_engine.basra.captures import SEVEN_OF_DIAMONDS
from tapis_engine.basra.rules import turn_order
from tapis_engine.cards import JACK, Card, standard_deck
from tapis_engine.protocol import GameSetup
from tests.support.cards import cards


def deck_for(seats: int, dealer: int, hands: dict[int, str] | None = None, floor: str = "",
             top: str = "") -> tuple[Card, ...]:
    """A 52-card deck whose deal gives these first hands, floor (before inspection) and stock top.

    Unnamed cards are filled from the rest in card order (never a jack or 7♦ on the floor).
    """
    order = turn_order(tuple(range(seats)), dealer)
    wanted = {s: list(cards((hands or {}).get(s, ""))) for s in order}
    laid = list(cards(floor))
    stock_top = list(cards(top))
    named = [c for h in wanted.values() for c in h] + laid + stock_top
    assert len(set(named)) == len(named), "a card is named twice"
    rest = [c for c in standard_deck() if c not in named]
    for seat in order:
        while len(wanted[seat]) < 4:
            wanted[seat].append(rest.pop(0))
    while len(laid) < 4:
        card = next(c for c in rest if c.rank != JACK and c != SEVEN_OF_DIAMONDS)
        rest.remove(card)
        laid.append(card)
    deck = [wanted[seat][i] for i in range(4) for seat in order]
    return tuple(deck + laid + stock_top + rest)


def start(seats: int = 2, dealer: int = 0, hands: dict[int, str] | None = None,
          floor: str = "", top: str = "", options: BasraOptions | None = None,
          seed: int = 1) -> tuple[BasraState, list[Any]]:
    deck = deck_for(seats, dealer, hands, floor, top)
    return RULES.start(GameSetup(seats, seed, options or BasraOptions(), deck, dealer))


def hand_built(seats: int = 2, hands: dict[int, str] | None = None, floor: str = "",
               to_move: int = 1, dealer: int = 0, stock: str = "",
               options: BasraOptions | None = None, scores: tuple[int, ...] | None = None,
               captured: dict[int, str] | None = None, last_capturer: int | None = None,
               playing: tuple[int, ...] | None = None) -> BasraState:
    """A state in the middle of a deal, exactly as given (cards need not add up to 52)."""
    sides = 2 if seats == 4 else seats
    return BasraState(
        seats=seats, options=options or BasraOptions(), rng=12345, deal=1, dealer=dealer,
        playing=playing or tuple(range(seats)),
        hands=tuple(cards((hands or {}).get(s, "")) for s in range(seats)),
        floor=cards(floor), stock=cards(stock),
        captured=tuple(cards((captured or {}).get(s, "")) for s in range(sides)),
        basras=(0,) * sides, scores=scores or (0,) * sides, to_move=to_move,
        last_capturer=last_capturer)
