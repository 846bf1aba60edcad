"""Cards between the engine (``Card(rank, suit)``) and ``tapis.v1.Card``."""

from __future__ import annotations

from collections.abc import Iterable

from tapis.v1 import cards_pb2
from tapis_engine.cards import JOKER, JOKER_SUIT, Card, card
from tapis_engine.errors import Reason, invalid

_SUIT_TO_PROTO = {"C": cards_pb2.SUIT_CLUBS, "D": cards_pb2.SUIT_DIAMONDS,
                  "H": cards_pb2.SUIT_HEARTS, "S": cards_pb2.SUIT_SPADES,
                  JOKER_SUIT: cards_pb2.SUIT_UNSPECIFIED}
_PROTO_TO_SUIT = {v: k for k, v in _SUIT_TO_PROTO.items() if k != JOKER_SUIT}

_CACHE: dict[Card, cards_pb2.Card] = {}
_WIRE: dict[Card, bytes] = {}


def card_to_proto(card: Card) -> cards_pb2.Card:
    """The protobuf form of an engine card."""
    message = _CACHE.get(card)
    if message is None:
        message = cards_pb2.Card(rank=card.rank, suit=_SUIT_TO_PROTO[card.suit])  # type: ignore[arg-type]
        _CACHE[card] = message
    return message


def card_wire(card: Card) -> bytes:
    """An engine card as a serialized ``tapis.v1.Card`` (cached: there are 53 of them)."""
    wire = _WIRE.get(card)
    if wire is None:
        wire = _WIRE[card] = card_to_proto(card).SerializeToString()
    return wire


def cards_to_proto(cards: Iterable[Card]) -> list[cards_pb2.Card]:
    return [card_to_proto(card) for card in cards]


def card_from_proto(message: cards_pb2.Card) -> Card:
    """The engine card; raise RuleError(INVALID_ACTION) for a card that does not exist."""
    rank = int(message.rank)
    if rank == JOKER:
        if message.suit != cards_pb2.SUIT_UNSPECIFIED:
            raise invalid(Reason.INVALID_ACTION, "a joker has no suit")
        return card(JOKER, JOKER_SUIT)
    if not 2 <= rank <= 14 or message.suit not in _PROTO_TO_SUIT:
        raise invalid(Reason.INVALID_ACTION, "not a card: give a rank and a suit")
    return card(rank, _PROTO_TO_SUIT[message.suit])
