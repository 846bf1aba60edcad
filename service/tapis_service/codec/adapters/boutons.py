"""La bataille des boutons messages."""

from __future__ import annotations

from typing import Any

from tapis.v1 import boutons_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine import boutons
from tapis_engine.boutons.state import (
    BETTING,
    DRAWING,
    NO_BUTTON_TO_BET,
    NO_BUTTONS_LEFT,
    OVER,
    RESERVE_EMPTY,
    SECOND_BLACK_ACE,
    Counts,
)
from tapis_engine.errors import Reason, invalid
from tapis_service.codec.adapters.cards import card_from_proto, card_to_proto

COLOUR_TO_PROTO = {
    "red": boutons_pb2.BOUTONS_COLOUR_RED, "blue": boutons_pb2.BOUTONS_COLOUR_BLUE,
    "green": boutons_pb2.BOUTONS_COLOUR_GREEN, "yellow": boutons_pb2.BOUTONS_COLOUR_YELLOW,
    "black": boutons_pb2.BOUTONS_COLOUR_BLACK, "white": boutons_pb2.BOUTONS_COLOUR_WHITE,
    "orange": boutons_pb2.BOUTONS_COLOUR_ORANGE, "purple": boutons_pb2.BOUTONS_COLOUR_PURPLE,
    boutons.RESERVE: boutons_pb2.BOUTONS_COLOUR_RESERVE,
}
PROTO_TO_COLOUR = {value: name for name, value in COLOUR_TO_PROTO.items()}
_PHASE = {BETTING: boutons_pb2.BOUTONS_PHASE_BETTING, DRAWING: boutons_pb2.BOUTONS_PHASE_DRAWING,
          OVER: boutons_pb2.BOUTONS_PHASE_OVER}
_ROUND_END = {SECOND_BLACK_ACE: boutons_pb2.BOUTONS_ROUND_END_REASON_SECOND_BLACK_ACE,
              NO_BUTTONS_LEFT: boutons_pb2.BOUTONS_ROUND_END_REASON_NO_BUTTONS_LEFT}
_END = {None: boutons_pb2.BOUTONS_END_REASON_UNSPECIFIED,
        RESERVE_EMPTY: boutons_pb2.BOUTONS_END_REASON_RESERVE_EMPTY,
        NO_BUTTON_TO_BET: boutons_pb2.BOUTONS_END_REASON_NO_BUTTON_TO_BET}


def piles_to_proto(counts: Counts) -> list[boutons_pb2.BoutonsButtonPile]:
    """The non-empty piles, in colour order."""
    return [boutons_pb2.BoutonsButtonPile(colour=COLOUR_TO_PROTO[name], count=count)
            for name, count in zip(boutons.ALL_COLOURS, counts, strict=True) if count]


class BoutonsAdapter:
    kind: str = boutons.RULES.kind
    proto_kind: int = pb.GAME_KIND_BOUTONS
    field: str = "boutons"

    def options_from_proto(self, message: Any) -> boutons.BoutonsOptions:
        if message is None or message.rounds == 0:
            return boutons.BoutonsOptions()
        return boutons.BoutonsOptions(rounds=message.rounds)

    def options_to_proto(self, options: boutons.BoutonsOptions) -> boutons_pb2.BoutonsOptions:
        return boutons_pb2.BoutonsOptions(rounds=options.rounds)

    def action_from_proto(self, message: Any) -> boutons.Bet | boutons.Flip:
        which = message.WhichOneof("action")
        if which == "flip":
            return boutons.Flip()
        if which == "bet":
            colour = PROTO_TO_COLOUR.get(message.bet.colour)
            if colour is None:
                raise invalid(Reason.INVALID_ACTION, "a bet needs a button colour")
            if not message.bet.HasField("card"):
                raise invalid(Reason.INVALID_ACTION, "a bet needs one of your laid-out cards")
            return boutons.Bet(colour, card_from_proto(message.bet.card))
        raise invalid(Reason.INVALID_ACTION, "a Boutons action must be `bet` or `flip`")

    def action_to_proto(self, action: boutons.Bet | boutons.Flip) -> boutons_pb2.BoutonsAction:
        if isinstance(action, boutons.Flip):
            return boutons_pb2.BoutonsAction(flip=boutons_pb2.BoutonsFlip())
        return boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(
            colour=COLOUR_TO_PROTO[action.colour], card=card_to_proto(action.card)))

    def event_wire(self, event: Any) -> bytes:
        return self.event_to_proto(event).SerializeToString()

    def event_to_proto(self, event: Any) -> boutons_pb2.BoutonsEvent:
        e = boutons_pb2
        if isinstance(event, boutons.CardFlipped):
            return e.BoutonsEvent(card_flipped=e.BoutonsCardFlipped(
                seat=event.seat, card=card_to_proto(event.card), deck_left=event.deck_left))
        if isinstance(event, boutons.BetPlaced):
            return e.BoutonsEvent(bet_placed=e.BoutonsBetPlaced(
                seat=event.seat, colour=COLOUR_TO_PROTO[event.colour],
                card=card_to_proto(event.card), bets_placed=event.bets_placed))
        if isinstance(event, boutons.ButtonsTaken):
            taken = e.BoutonsButtonsTaken(seat=event.seat, buttons=piles_to_proto(event.buttons))
            if event.card is not None:
                taken.card.CopyFrom(card_to_proto(event.card))
            return e.BoutonsEvent(buttons_taken=taken)
        if isinstance(event, boutons.BlackAceSetAside):
            return e.BoutonsEvent(black_ace_set_aside=e.BoutonsBlackAceSetAside(
                seat=event.seat, card=card_to_proto(event.card),
                black_aces_out=event.black_aces_out))
        if isinstance(event, boutons.ReserveToCentre):
            return e.BoutonsEvent(reserve_to_centre=e.BoutonsReserveToCentre(
                round=event.round, first_seat=event.first, reserve_left=event.reserve_left,
                centre=event.centre))
        if isinstance(event, boutons.DrawStarted):
            return e.BoutonsEvent(draw_started=e.BoutonsDrawStarted(
                seat=event.seat, deck_left=event.deck_left))
        if isinstance(event, boutons.BettingStopped):
            return e.BoutonsEvent(betting_stopped=e.BoutonsBettingStopped(seat=event.seat))
        if isinstance(event, boutons.RoundEnded):
            return e.BoutonsEvent(round_ended=e.BoutonsRoundEnded(
                round=event.round, reason=_ROUND_END[event.reason], game_over=event.game_over))
        if isinstance(event, boutons.BoutonsEnded):
            return e.BoutonsEvent(ended=e.BoutonsEnded(
                reason=_END[event.reason],
                players=[e.BoutonsFinalScore(seat=seat, buttons=piles_to_proto(hand),
                                             score=score)
                         for seat, (hand, score)
                         in enumerate(zip(event.hands, event.scores, strict=True))],
                winners=event.winners, left_on_cards=event.left_on_cards,
                left_in_centre=event.left_in_centre))
        raise TypeError(f"not a Boutons event: {event!r}")

    def view_to_proto(self, view: boutons.BoutonsView) -> boutons_pb2.BoutonsView:
        e = boutons_pb2
        players = [
            e.BoutonsPlayer(
                seat=seat, buttons=piles_to_proto(view.hands[seat]), score=view.scores[seat],
                cards=[e.BoutonsLaidOutCard(card=card_to_proto(laid.card),
                                            buttons=piles_to_proto(laid.buttons))
                       for laid in view.laid_out[seat]])
            for seat in range(view.seats)]
        message = e.BoutonsView(
            round=view.round, rounds=view.rounds, first_seat=view.first, phase=_PHASE[view.phase],
            to_move=view.to_move, players=players, centre=view.centre, reserve=view.reserve,
            black_aces=[card_to_proto(card) for card in view.black_aces],
            deck_left=view.deck_left, bets_placed=view.bets_placed,
            last_round=view.betting_stopped, winners=view.winners, end_reason=_END[view.end])
        if view.last_flip is not None:
            message.last_flip.CopyFrom(card_to_proto(view.last_flip))
        return message
