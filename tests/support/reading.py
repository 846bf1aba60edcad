"""Requests and frames as read (``codec.requests``, ``ws.frames``), as values a test compares;
and requests of every game, generated (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tapis.v1 import basra_pb2, boutons_pb2, cards_pb2, war_pb2
from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec.moves import ReadAction
from tapis_service.codec.requests import ActionRequest
from tapis_service.ws.frames import Frame


def action_values(action: ReadAction | None) -> tuple[Any, ...] | None:
    """What an action read holds: its oneof's field and its game's message, serialized."""
    if action is None:
        return None
    return (action.which,
            None if action.message is None else action.message.SerializeToString())


def request_values(request: Any) -> Any:
    """An ``ActionRequest``'s fields (its bytes left out: two encodings of one request read
    alike); any other request as it is (a message)."""
    if not isinstance(request, ActionRequest):
        return request
    return (request.game_id, action_values(request.action), request.request_id,
            request.expected_version, request.seat)


def frame_values(frame: Frame) -> tuple[Any, ...]:
    """A frame's fields, its request's as ``request_values``."""
    return (frame.id, frame.seat_token, frame.api_key, frame.field,
            request_values(frame.request))


CARDS = st.builds(cards_pb2.Card, rank=st.integers(0, 14), suit=st.integers(0, 5))
ACTIONS = st.one_of(
    st.just(pb.Action()),
    st.just(pb.Action(reclaim_seat=pb.ReclaimSeat())),
    st.just(pb.Action(start_next_game=pb.StartNextGame())),
    st.just(pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))),
    st.just(pb.Action(war=war_pb2.WarAction())),
    st.just(pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))),
    st.builds(lambda n: pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        slap=corse_pb2.BatailleCorseSlap(pile_sequence=n))), st.integers(0, 2**32 - 1)),
    st.builds(lambda colour, card: pb.Action(boutons=boutons_pb2.BoutonsAction(
        bet=boutons_pb2.BoutonsBet(colour=colour, card=card))), st.integers(0, 4), CARDS),
    st.builds(lambda card, capture: pb.Action(basra=basra_pb2.BasraAction(
        play_card=basra_pb2.BasraPlayCard(card=card, capture=basra_pb2.BasraCapture(
            cards=capture)))), CARDS, st.lists(CARDS, max_size=6)),
)
TEXT = st.text(max_size=200)
REQUESTS = st.builds(
    lambda game_id, action, request_id, expected, seat: pb.SubmitActionRequest(
        game_id=game_id, action=action, request_id=request_id, expected_version=expected,
        seat=seat),
    TEXT, st.none() | ACTIONS, TEXT, st.none() | st.integers(0, 2**64 - 1),
    st.none() | st.integers(0, 2**32 - 1))
