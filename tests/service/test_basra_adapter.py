"""Basra adapter: engine events, views and actions to tapis.v1 messages (and actions back)."""

from __future__ import annotations

import pytest

from tapis.v1 import basra_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine import rng
from tapis_engine.basra import RULES, BasraOptions
from tapis_engine.basra.state import HandsDealt
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup
from tapis_service.codec.adapters.basra import BasraAdapter
from tapis_service.codec.adapters.cards import card_from_proto

ADAPTER = BasraAdapter()


def test_identity() -> None:
    assert (ADAPTER.kind, ADAPTER.field) == ("basra", "basra")
    assert ADAPTER.proto_kind == pb.GAME_KIND_BASRA


@pytest.mark.parametrize(("seats", "seed"), [(2, 1), (3, 2), (4, 3)])
def test_seeded_games_convert(seats: int, seed: int) -> None:
    state, events = RULES.start(GameSetup(seats, seed, BasraOptions(variant="iraqi")))
    kinds: set[str] = set()
    bot_seed = seed
    while True:
        for seat in [None, *range(seats)]:
            view = ADAPTER.view_to_proto(RULES.view(state, seat))
            pb.GameView(basra=view)  # fits the oneof
            assert list(map(card_from_proto, view.hand)) == sorted(
                state.hands[seat]) if seat is not None else not view.hand
            assert [card_from_proto(c) for c in view.floor] == list(state.floor)
            assert list(view.hand_sizes) == [len(h) for h in state.hands]
            assert [s.score for s in view.sides] == list(state.scores)
            for event in events:
                message = ADAPTER.event_to_proto(RULES.redact(event, seat))
                kinds.add(message.WhichOneof("event"))
                pb.Event(basra=message)
                if isinstance(event, HandsDealt):
                    for hand in message.hands_dealt.hands:
                        assert hand.visible == (hand.seat == seat)
                        assert bool(hand.cards) == (hand.seat == seat and hand.size > 0)
        if state.over:
            break
        for action in RULES.legal_actions(state, state.to_move):
            message = ADAPTER.action_to_proto(action)
            assert pb.Action(basra=message).basra == message
            assert ADAPTER.action_from_proto(message) == action
        bot_seed, _ = rng.next_u64(bot_seed)
        state, events = RULES.apply(state, state.to_move,
                                    RULES.bot_action(state, state.to_move, "random", bot_seed))
    assert {"hands_dealt", "floor_laid", "card_played", "captured", "deal_scored",
            "ended"} <= kinds


def test_action_without_capture_round_trips_as_absent() -> None:
    state, _ = RULES.start(GameSetup(2, 4, BasraOptions()))
    action = RULES.legal_actions(state, state.to_move)[0]._replace(capture=None)
    message = ADAPTER.action_to_proto(action)
    assert not message.play_card.HasField("capture")
    assert ADAPTER.action_from_proto(message) == action


def test_malformed_actions_are_refused() -> None:
    with pytest.raises(RuleError) as info:
        ADAPTER.action_from_proto(basra_pb2.BasraAction())
    assert info.value.reason == Reason.INVALID_ACTION
    with pytest.raises(RuleError) as info:
        ADAPTER.action_from_proto(basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard()))
    assert info.value.reason == Reason.INVALID_ACTION


def test_options_round_trip_and_defaults() -> None:
    assert ADAPTER.options_from_proto(None) == BasraOptions()
    assert ADAPTER.options_from_proto(basra_pb2.BasraOptions()) == BasraOptions()
    options = BasraOptions(variant="lebanese", target=151)
    assert ADAPTER.options_from_proto(ADAPTER.options_to_proto(options)) == options
    with pytest.raises(RuleError) as info:
        ADAPTER.options_from_proto(basra_pb2.BasraOptions(variant=99))  # type: ignore[arg-type]
    assert info.value.reason == Reason.INVALID_OPTIONS
