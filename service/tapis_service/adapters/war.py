"""Bataille (War) messages."""

from __future__ import annotations

from typing import Any

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_engine import war
from tapis_engine.errors import Reason, invalid
from tapis_service.adapters.cards import card_to_proto

_END = {None: war_pb2.WAR_END_REASON_UNSPECIFIED, "target": war_pb2.WAR_END_REASON_TARGET,
        "all_cards": war_pb2.WAR_END_REASON_ALL_CARDS,
        "short_bataille": war_pb2.WAR_END_REASON_SHORT_BATAILLE,
        "draw": war_pb2.WAR_END_REASON_DRAW}


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
        return war.Reveal()

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

    def view_to_proto(self, view: war.WarView) -> war_pb2.WarView:
        return war_pb2.WarView(
            deck_sizes=view.deck_sizes, points=view.points, target_points=view.target,
            first_seat=view.first, to_move=view.to_move, trick=_laid(view.trick),
            last_trick=_laid(view.last_trick), last_trick_winner=view.last_winner,
            batailles=view.batailles, winner=view.winner, end_reason=_END[view.end])
