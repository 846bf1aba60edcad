"""Every deck, parsed card and card from the contract is one of the shared card instances."""

from __future__ import annotations

from tapis.v1 import cards_pb2
from tapis_engine import war
from tapis_engine.cards import (
    JOKER,
    JOKER_SUIT,
    Card,
    card,
    cards_from_text,
    cards_to_text,
    deck_with_jokers,
    parse_card,
    piquet_deck,
    standard_deck,
)
from tapis_engine.protocol import GameSetup
from tapis_service.codec.adapters.cards import card_from_proto, card_to_proto


def test_cards_are_shared_and_equal_to_fresh_ones() -> None:
    for built in (*standard_deck(), *deck_with_jokers(), *piquet_deck()):
        fresh = Card(built.rank, built.suit)
        assert built == fresh and hash(built) == hash(fresh)
        assert built is card(built.rank, built.suit)
        assert parse_card(str(built)) is built
        assert card_from_proto(card_to_proto(built)) is built
    assert card(JOKER, JOKER_SUIT) is deck_with_jokers()[-1] is deck_with_jokers()[-2]
    assert cards_from_text(cards_to_text(standard_deck())) == standard_deck()
    assert card(99, "X") == Card(99, "X")  # outside the deck: a fresh card, still equal


def test_a_dealt_war_game_holds_the_shared_cards() -> None:
    rules = war.WarRules()
    state, _ = rules.start(GameSetup(seats=2, seed=7, options=rules.default_options()))
    for deck in state.decks:
        assert all(c is card(c.rank, c.suit) for c in deck)
    assert card_from_proto(cards_pb2.Card(rank=JOKER)) is card(JOKER, JOKER_SUIT)
