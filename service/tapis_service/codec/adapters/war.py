"""Bataille (War) messages."""

from __future__ import annotations

from typing import Any, Final

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_engine import war
from tapis_engine.cards import standard_deck
from tapis_engine.errors import Reason, invalid
from tapis_service.codec.adapters.cards import card_to_proto, card_wire
from tapis_service.codec.wire import flag, nested, optional_uint, packed, pair, tag, uint, varint

_END = {None: war_pb2.WAR_END_REASON_UNSPECIFIED, "target": war_pb2.WAR_END_REASON_TARGET,
        "all_cards": war_pb2.WAR_END_REASON_ALL_CARDS,
        "short_bataille": war_pb2.WAR_END_REASON_SHORT_BATAILLE,
        "draw": war_pb2.WAR_END_REASON_DRAW}


_EVENT = war_pb2.WarEvent.DESCRIPTOR
_REVEALED = war_pb2.WarCardRevealed.DESCRIPTOR
_TRICK = war_pb2.WarTrickWon.DESCRIPTOR
_BATAILLE = war_pb2.WarBatailleAnnounced.DESCRIPTOR
_DEALT = war_pb2.WarDealt.DESCRIPTOR
_SHORT = war_pb2.WarShortBataille.DESCRIPTOR
_ENDED = war_pb2.WarEnded.DESCRIPTOR
_K_REVEALED: Final = tag(_EVENT, "card_revealed")
_K_REVEALED_SEAT: Final = tag(_REVEALED, "seat")
_K_REVEALED_CARD: Final = tag(_REVEALED, "card")
_K_REVEALED_FACE_DOWN: Final = tag(_REVEALED, "with_face_down")
_K_REVEALED_SIZES: Final = tag(_REVEALED, "deck_sizes")
_REVEALED_FACE_DOWN: Final = flag(_K_REVEALED_FACE_DOWN, True)
_K_TRICK: Final = tag(_EVENT, "trick_won")
_K_TRICK_SEAT: Final = tag(_TRICK, "seat")
_K_TRICK_CARDS: Final = tag(_TRICK, "cards")
_K_TRICK_POINTS: Final = tag(_TRICK, "points")
_K_TRICK_SIZES: Final = tag(_TRICK, "deck_sizes")
_K_BATAILLE: Final = tag(_EVENT, "bataille")
_K_BATAILLE_COUNT: Final = tag(_BATAILLE, "count")
_K_DEALT: Final = tag(_EVENT, "dealt")
_K_DEALT_SIZES: Final = tag(_DEALT, "deck_sizes")
_K_DEALT_FIRST: Final = tag(_DEALT, "first_seat")
_K_SHORT: Final = tag(_EVENT, "short_bataille")
_K_SHORT_LOSER: Final = tag(_SHORT, "loser")
_K_SHORT_SIZES: Final = tag(_SHORT, "deck_sizes")
_K_ENDED: Final = tag(_EVENT, "ended")
_K_ENDED_WINNER: Final = tag(_ENDED, "winner")
_K_ENDED_REASON: Final = tag(_ENDED, "reason")
_K_ENDED_POINTS: Final = tag(_ENDED, "points")
_K_ENDED_SIZES: Final = tag(_ENDED, "deck_sizes")


_CARD_FIELDS: Final = {card: nested(_K_REVEALED_CARD, card_wire(card)) for card in standard_deck()}
"""``WarCardRevealed.card`` of each card of the deck, encoded (a constant table)."""


def _card_field(card: Any) -> bytes:
    """``WarCardRevealed.card``, encoded."""
    field = _CARD_FIELDS.get(card)
    return field if field is not None else nested(_K_REVEALED_CARD, card_wire(card))


def _laid(cards: tuple[war.Laid | None, ...]) -> list[war_pb2.WarLaidCard]:
    out = []
    # Face-down cards are None in the view: recover whose they were from the laying order.
    for laid in cards:
        if laid is None:
            out.append(war_pb2.WarLaidCard(face_up=False))
        else:
            out.append(war_pb2.WarLaidCard(seat=laid.seat, face_up=True,
                                           card=card_to_proto(laid.card)))
    # A face-down card is always followed by the same seat's face-up card.
    for i in range(len(out) - 1):
        if not out[i].face_up:
            out[i].seat = out[i + 1].seat
    return out


_REVEAL = war.Reveal()
"""The one reveal (it has no fields): shared, not built for every action."""


class WarAdapter:
    kind = war.RULES.kind
    proto_kind: int = pb.GAME_KIND_WAR
    field = "war"

    def options_from_proto(self, message: Any) -> war.WarOptions:
        if message is None or message.target_points == 0:
            return war.WarOptions()
        return war.WarOptions(target_points=message.target_points)

    def options_to_proto(self, options: war.WarOptions) -> war_pb2.WarOptions:
        return war_pb2.WarOptions(target_points=options.target_points)

    def action_from_proto(self, message: Any) -> war.Reveal:
        if message.WhichOneof("action") != "reveal":
            raise invalid(Reason.INVALID_ACTION, "a Bataille action must be `reveal`")
        return _REVEAL

    def action_to_proto(self, action: war.Reveal) -> war_pb2.WarAction:
        return war_pb2.WarAction(reveal=war_pb2.WarReveal())

    def event_to_proto(self, event: Any) -> war_pb2.WarEvent:
        if isinstance(event, war.CardRevealed):
            return war_pb2.WarEvent(card_revealed=war_pb2.WarCardRevealed(
                seat=event.seat, card=card_to_proto(event.card),
                with_face_down=event.with_face_down, deck_sizes=event.deck_sizes))
        if isinstance(event, war.TrickWon):
            return war_pb2.WarEvent(trick_won=war_pb2.WarTrickWon(
                seat=event.seat, cards=event.cards, points=event.points,
                deck_sizes=event.deck_sizes))
        if isinstance(event, war.BatailleAnnounced):
            return war_pb2.WarEvent(bataille=war_pb2.WarBatailleAnnounced(count=event.count))
        if isinstance(event, war.Dealt):
            return war_pb2.WarEvent(dealt=war_pb2.WarDealt(
                deck_sizes=event.deck_sizes, first_seat=event.first))
        if isinstance(event, war.ShortBataille):
            return war_pb2.WarEvent(short_bataille=war_pb2.WarShortBataille(
                loser=event.loser, deck_sizes=event.deck_sizes))
        if isinstance(event, war.WarEnded):
            return war_pb2.WarEvent(ended=war_pb2.WarEnded(
                winner=event.winner, reason=_END[event.reason], points=event.points,
                deck_sizes=event.deck_sizes))
        raise TypeError(f"not a War event: {event!r}")

    def event_wire(self, event: Any) -> bytes:
        """``event_to_proto(event).SerializeToString()``, written by hand (every action)."""
        if type(event) is war.CardRevealed:  # the two hot ones: typed, so read as native fields
            seat = event.seat
            first, second = event.deck_sizes
            return nested(_K_REVEALED, b"".join((
                _K_REVEALED_SEAT + varint(seat) if seat else b"",
                _card_field(event.card),
                _REVEALED_FACE_DOWN if event.with_face_down else b"",
                pair(_K_REVEALED_SIZES, first, second))))
        if type(event) is war.TrickWon:
            seat, cards = event.seat, event.cards
            won, lost = event.points
            first, second = event.deck_sizes
            return nested(_K_TRICK, b"".join((
                _K_TRICK_SEAT + varint(seat) if seat else b"",
                _K_TRICK_CARDS + varint(cards) if cards else b"",
                pair(_K_TRICK_POINTS, won, lost),
                pair(_K_TRICK_SIZES, first, second))))
        kind = type(event)
        if kind is war.BatailleAnnounced:
            return nested(_K_BATAILLE, uint(_K_BATAILLE_COUNT, event.count))
        if kind is war.Dealt:
            return nested(_K_DEALT, packed(_K_DEALT_SIZES, event.deck_sizes)
                          + uint(_K_DEALT_FIRST, event.first))
        if kind is war.ShortBataille:
            return nested(_K_SHORT, optional_uint(_K_SHORT_LOSER, event.loser)
                          + packed(_K_SHORT_SIZES, event.deck_sizes))
        if kind is war.WarEnded:
            return nested(_K_ENDED, b"".join((
                optional_uint(_K_ENDED_WINNER, event.winner),
                uint(_K_ENDED_REASON, _END[event.reason]),
                packed(_K_ENDED_POINTS, event.points),
                packed(_K_ENDED_SIZES, event.deck_sizes))))
        return self.event_to_proto(event).SerializeToString()

    def view_to_proto(self, view: war.WarView) -> war_pb2.WarView:
        return war_pb2.WarView(
            deck_sizes=view.deck_sizes, points=view.points, target_points=view.target,
            first_seat=view.first, to_move=view.to_move, trick=_laid(view.trick),
            last_trick=_laid(view.last_trick), last_trick_winner=view.last_winner,
            batailles=view.batailles, winner=view.winner, end_reason=_END[view.end])
