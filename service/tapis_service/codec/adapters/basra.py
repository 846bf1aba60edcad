"""Basra messages."""

from __future__ import annotations

from typing import Any

from tapis.v1 import basra_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine.basra import state as basra
from tapis_engine.errors import Reason, invalid
from tapis_service.codec.adapters.cards import card_from_proto, card_to_proto, cards_to_proto

_VARIANT_TO_PROTO = {basra.EGYPTIAN: basra_pb2.BASRA_VARIANT_EGYPTIAN,
                     basra.LEBANESE: basra_pb2.BASRA_VARIANT_LEBANESE,
                     basra.IRAQI: basra_pb2.BASRA_VARIANT_IRAQI}
_VARIANT_FROM_PROTO = {v: k for k, v in _VARIANT_TO_PROTO.items()}
_VARIANT_FROM_PROTO[basra_pb2.BASRA_VARIANT_UNSPECIFIED] = basra.EGYPTIAN
_SWEEP = {"sum": basra_pb2.BASRA_SWEEP_KIND_SUM, "rank": basra_pb2.BASRA_SWEEP_KIND_RANK,
          "seven": basra_pb2.BASRA_SWEEP_KIND_SEVEN, "jack": basra_pb2.BASRA_SWEEP_KIND_JACK,
          "match": basra_pb2.BASRA_SWEEP_KIND_MATCH}


def _line(line: basra.SideScore) -> basra_pb2.BasraScoreLine:
    return basra_pb2.BasraScoreLine(
        side=line.side, seats=line.seats, cards=line.cards, most_cards=line.most_cards,
        ten_of_diamonds=line.ten_of_diamonds, two_of_clubs=line.two_of_clubs, aces=line.aces,
        jacks=line.jacks, basras=line.basras, basra_points=line.basra_points,
        points=line.points, total=line.total)


class BasraAdapter:
    """Basra options, actions, events and views between the engine and ``tapis.v1``."""

    kind = "basra"
    proto_kind: int = pb.GAME_KIND_BASRA
    field = "basra"

    def options_from_proto(self, message: Any) -> basra.BasraOptions:
        if message is None:
            return basra.BasraOptions()
        variant = _VARIANT_FROM_PROTO.get(message.variant)
        if variant is None:
            raise invalid(Reason.INVALID_OPTIONS, "unknown Basra variant")
        return basra.BasraOptions(variant=variant,
                                  two_card_jack_basra=message.two_card_jack_basra,
                                  target=message.target or 101)

    def options_to_proto(self, options: basra.BasraOptions) -> basra_pb2.BasraOptions:
        return basra_pb2.BasraOptions(variant=_VARIANT_TO_PROTO[options.variant],
                                      two_card_jack_basra=options.two_card_jack_basra,
                                      target=options.target)

    def action_from_proto(self, message: Any) -> basra.PlayCard:
        if message.WhichOneof("action") != "play_card":
            raise invalid(Reason.INVALID_ACTION, "a Basra action must be `play_card`")
        play = message.play_card
        if not play.HasField("card"):
            raise invalid(Reason.INVALID_ACTION, "name the card to play")
        capture = None
        if play.HasField("capture"):
            capture = tuple(sorted(card_from_proto(c) for c in play.capture.cards))
        return basra.PlayCard(card_from_proto(play.card), capture)

    def action_to_proto(self, action: basra.PlayCard) -> basra_pb2.BasraAction:
        play = basra_pb2.BasraPlayCard(card=card_to_proto(action.card))
        if action.capture is not None:
            play.capture.CopyFrom(basra_pb2.BasraCapture(cards=cards_to_proto(action.capture)))
        return basra_pb2.BasraAction(play_card=play)

    def event_wire(self, event: Any) -> bytes:
        return self.event_to_proto(event).SerializeToString()

    def event_to_proto(self, event: Any) -> basra_pb2.BasraEvent:
        if isinstance(event, basra.CardPlayed):
            return basra_pb2.BasraEvent(card_played=basra_pb2.BasraCardPlayed(
                seat=event.seat, card=card_to_proto(event.card), hand_size=event.hand_size))
        if isinstance(event, basra.Captured):
            return basra_pb2.BasraEvent(captured=basra_pb2.BasraCaptured(
                seat=event.seat, side=event.side, card=card_to_proto(event.card),
                taken=cards_to_proto(event.taken), captured_counts=event.captured_counts))
        if isinstance(event, basra.BasraScored):
            return basra_pb2.BasraEvent(basra=basra_pb2.BasraScored(
                seat=event.seat, side=event.side, kind=_SWEEP[event.how], basras=event.basras))
        if isinstance(event, basra.HandsDealt):
            hands = [basra_pb2.BasraHand(seat=seat, size=event.hand_sizes[seat],
                                         visible=hand is not None,
                                         cards=cards_to_proto(hand or ()))
                     for seat, hand in enumerate(event.hands)]
            return basra_pb2.BasraEvent(hands_dealt=basra_pb2.BasraHandsDealt(
                deal=event.deal, dealer=event.dealer, round=event.round, hands=hands,
                stock_size=event.stock_size))
        if isinstance(event, basra.FloorLaid):
            return basra_pb2.BasraEvent(floor_laid=basra_pb2.BasraFloorLaid(
                laid=cards_to_proto(event.laid), buried=cards_to_proto(event.buried),
                floor=cards_to_proto(event.floor), stock_size=event.stock_size))
        if isinstance(event, basra.LeftoverSwept):
            return basra_pb2.BasraEvent(leftover_swept=basra_pb2.BasraLeftoverSwept(
                seat=event.seat, side=event.side, cards=cards_to_proto(event.cards),
                captured_counts=event.captured_counts))
        if isinstance(event, basra.DealScored):
            return basra_pb2.BasraEvent(deal_scored=basra_pb2.BasraDealScored(
                deal=event.deal, lines=[_line(line) for line in event.lines],
                scores=event.scores))
        if isinstance(event, basra.TieDeal):
            return basra_pb2.BasraEvent(tie_deal=basra_pb2.BasraTieDeal(
                sides=event.sides, seats=event.seats))
        if isinstance(event, basra.BasraEnded):
            return basra_pb2.BasraEvent(ended=basra_pb2.BasraEnded(
                winning_sides=event.winners, winning_seats=event.winning_seats,
                scores=event.scores))
        raise TypeError(f"not a Basra event: {event!r}")

    def view_to_proto(self, view: basra.BasraView) -> basra_pb2.BasraView:
        seats = len(view.hand_sizes)
        sides = [basra_pb2.BasraSide(side=side, seats=basra.seats_of_side(seats, side),
                                     captured_cards=view.captured_counts[side],
                                     basras=view.basras[side], score=view.scores[side])
                 for side in range(len(view.scores))]
        return basra_pb2.BasraView(
            seat=view.seat, hand=cards_to_proto(view.hand or ()), floor=cards_to_proto(view.floor),
            stock_size=view.stock_size, hand_sizes=view.hand_sizes, sides=sides,
            dealer=view.dealer, to_move=view.to_move, deal=view.deal,
            playing_seats=view.playing, last_capturer=view.last_capturer,
            variant=_VARIANT_TO_PROTO[view.variant],
            two_card_jack_basra=view.two_card_jack_basra, target=view.target, teams=view.teams,
            winning_sides=view.winners, over=view.over)
