"""Bataille Corse messages."""

from __future__ import annotations

from typing import Any

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine import corse
from tapis_engine.corse.combinations import ALL_COMBINATIONS
from tapis_engine.corse.state import (
    CHALLENGE,
    ELIMINATED,
    FLIP_CAP,
    IN_PLAY,
    LAST_IN_PLAY,
    OUT,
)
from tapis_engine.errors import Reason, invalid
from tapis_service.codec.adapters.cards import card_to_proto, cards_to_proto

COMBINATION_TO_PROTO: dict[str, Any] = {
    "double": corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE,
    "sandwich": corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH,
    "big_mac": corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC,
    "suite": corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE,
    "ten": corse_pb2.BATAILLE_CORSE_COMBINATION_TEN,
    "seven": corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN,
}
PROTO_TO_COMBINATION = {value: name for name, value in COMBINATION_TO_PROTO.items()}
assert set(COMBINATION_TO_PROTO) == set(ALL_COMBINATIONS)

_STATUS: dict[str, Any] = {
    IN_PLAY: corse_pb2.BATAILLE_CORSE_SEAT_STATUS_IN_PLAY,
    ELIMINATED: corse_pb2.BATAILLE_CORSE_SEAT_STATUS_ELIMINATED,
    OUT: corse_pb2.BATAILLE_CORSE_SEAT_STATUS_OUT,
}
_END: dict[str | None, Any] = {
    None: corse_pb2.BATAILLE_CORSE_END_REASON_UNSPECIFIED,
    LAST_IN_PLAY: corse_pb2.BATAILLE_CORSE_END_REASON_LAST_IN_PLAY,
    FLIP_CAP: corse_pb2.BATAILLE_CORSE_END_REASON_FLIP_CAP,
}


def _pile_reason(reason: str) -> tuple[Any, Any]:
    """The pile-won reason and combination enums for an engine reason."""
    if reason == CHALLENGE:
        return (corse_pb2.BATAILLE_CORSE_PILE_REASON_CHALLENGE,
                corse_pb2.BATAILLE_CORSE_COMBINATION_UNSPECIFIED)
    if reason == LAST_IN_PLAY:
        return (corse_pb2.BATAILLE_CORSE_PILE_REASON_LAST_IN_PLAY,
                corse_pb2.BATAILLE_CORSE_COMBINATION_UNSPECIFIED)
    return corse_pb2.BATAILLE_CORSE_PILE_REASON_COMBINATION, COMBINATION_TO_PROTO[reason]


class CorseAdapter:
    kind = corse.RULES.kind
    proto_kind: int = pb.GAME_KIND_BATAILLE_CORSE
    field = "bataille_corse"

    def options_from_proto(self, message: Any) -> corse.CorseOptions:
        if message is None:
            return corse.CorseOptions()
        disabled = set()
        for value in message.disabled_combinations:
            if value not in PROTO_TO_COMBINATION:
                raise invalid(Reason.INVALID_OPTIONS, f"unknown combination {value}")
            disabled.add(PROTO_TO_COMBINATION[value])
        enabled = frozenset(name for name in ALL_COMBINATIONS if name not in disabled)
        defaults = corse.CorseOptions()
        return corse.CorseOptions(combinations=enabled,
                                  flip_cap=message.flip_cap or defaults.flip_cap)

    def options_to_proto(self, options: corse.CorseOptions) -> corse_pb2.BatailleCorseOptions:
        disabled = [COMBINATION_TO_PROTO[name] for name in ALL_COMBINATIONS
                    if name not in options.combinations]
        return corse_pb2.BatailleCorseOptions(disabled_combinations=disabled,
                                              flip_cap=options.flip_cap)

    def action_from_proto(self, message: Any) -> corse.Flip | corse.Slap:
        which = message.WhichOneof("action")
        if which == "flip":
            return corse.Flip()
        if which == "slap":
            return corse.Slap(message.slap.pile_sequence)
        raise invalid(Reason.INVALID_ACTION, "a Bataille Corse action must be `flip` or `slap`")

    def action_to_proto(self, action: corse.Flip | corse.Slap) -> corse_pb2.BatailleCorseAction:
        if isinstance(action, corse.Slap):
            return corse_pb2.BatailleCorseAction(
                slap=corse_pb2.BatailleCorseSlap(pile_sequence=action.pile_sequence))
        return corse_pb2.BatailleCorseAction(flip=corse_pb2.BatailleCorseFlip())

    def event_wire(self, event: Any) -> bytes:
        return self.event_to_proto(event).SerializeToString()

    def event_to_proto(self, event: Any) -> corse_pb2.BatailleCorseEvent:
        E = corse_pb2.BatailleCorseEvent
        if isinstance(event, corse.CardFlipped):
            return E(card_flipped=corse_pb2.BatailleCorseCardFlipped(
                seat=event.seat, card=card_to_proto(event.card), pile_sequence=event.sequence,
                drawn_from=event.drawn_from))
        if isinstance(event, corse.PileWon):
            reason, combination = _pile_reason(event.reason)
            return E(pile_won=corse_pb2.BatailleCorsePileWon(
                seat=event.seat, reason=reason, combination=combination, cards=event.cards,
                deck_sizes=event.deck_sizes))
        if isinstance(event, corse.ChallengeStarted):
            return E(challenge_started=corse_pb2.BatailleCorseChallengeStarted(
                challenger=event.challenger, tries=event.tries, owes=event.owes))
        if isinstance(event, corse.ChallengePassed):
            return E(challenge_passed=corse_pb2.BatailleCorseChallengePassed(
                challenger=event.challenger, previous_challenger=event.previous,
                tries=event.tries, owes=event.owes))
        if isinstance(event, corse.FalseSlap):
            return E(false_slap=corse_pb2.BatailleCorseFalseSlap(
                seat=event.seat, penalty_cards=event.penalty_cards, strikes=event.strikes,
                pile_size=event.pile_size))
        if isinstance(event, corse.Eliminated):
            return E(eliminated=corse_pb2.BatailleCorseEliminated(seat=event.seat))
        if isinstance(event, corse.Reentered):
            return E(reentered=corse_pb2.BatailleCorseReentered(seat=event.seat))
        if isinstance(event, corse.OutForGood):
            return E(out_for_good=corse_pb2.BatailleCorseOutForGood(seat=event.seat))
        if isinstance(event, corse.Dealt):
            return E(dealt=corse_pb2.BatailleCorseDealt(deck_sizes=event.deck_sizes))
        if isinstance(event, corse.CorseEnded):
            return E(ended=corse_pb2.BatailleCorseEnded(
                winner=event.winner, reason=_END[event.reason], deck_sizes=event.deck_sizes))
        raise TypeError(f"not a Bataille Corse event: {event!r}")

    def view_to_proto(self, view: corse.CorseView) -> corse_pb2.BatailleCorseView:
        seats = [corse_pb2.BatailleCorseSeat(seat=seat, status=_STATUS[status],
                                             deck_size=view.deck_sizes[seat],
                                             strikes=view.strikes[seat])
                 for seat, status in enumerate(view.statuses)]
        return corse_pb2.BatailleCorseView(
            pile_top=cards_to_proto(view.pile_top), pile_size=view.pile_size,
            top_sequence=view.top_sequence, deck_sizes=view.deck_sizes, turn=view.turn,
            challenger=view.challenger, tries_left=view.tries_left, owes=view.owes,
            seats=seats, flips=view.flips, flip_cap=view.flip_cap,
            combinations=[COMBINATION_TO_PROTO[name] for name in view.combinations],
            winner=view.winner, end_reason=_END[view.end])
