"""Boutons adapter: engine events, views and actions to tapis.v1 messages (and actions back),
over seeded games; the client renderer draws every view and describes every event."""

from __future__ import annotations

import pytest
from rich.console import Console

from tapis.v1 import boutons_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients.games import boutons as screen
from tapis_engine import rng
from tapis_engine.boutons import ALL_COLOURS, RULES, Bet, BoutonsOptions, Flip
from tapis_engine.cards import parse_card
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup
from tapis_service.codec.adapters.boutons import COLOUR_TO_PROTO, BoutonsAdapter
from tapis_service.codec.adapters.cards import card_from_proto

ADAPTER = BoutonsAdapter()


def _counts(piles: list[boutons_pb2.BoutonsButtonPile]) -> tuple[int, ...]:
    counts = dict.fromkeys(ALL_COLOURS, 0)
    names = {value: name for name, value in COLOUR_TO_PROTO.items()}
    for pile in piles:
        assert pile.count > 0
        counts[names[pile.colour]] += pile.count
    return tuple(counts[name] for name in ALL_COLOURS)


def test_adapter_names() -> None:
    assert (ADAPTER.kind, ADAPTER.field, ADAPTER.proto_kind) == (
        "boutons", "boutons", pb.GAME_KIND_BOUTONS)


@pytest.mark.parametrize(("seats", "seed"), [(2, 1), (3, 2), (4, 3)])
def test_seeded_game_through_the_adapter(seats: int, seed: int) -> None:
    console = Console(record=True, width=140)
    state, events = RULES.start(GameSetup(seats, seed, BoutonsOptions()))
    kinds: set[str] = set()
    step = 0
    while True:
        for event in events:
            message = ADAPTER.event_to_proto(RULES.redact(event, 0))
            kinds.add(str(message.WhichOneof("event")))
            line = screen.describe_event(pb.Event(boutons=message), 0)
            assert line
            console.print(line)
        view = RULES.view(state, 0)
        proto = ADAPTER.view_to_proto(view)
        assert len(proto.players) == seats
        for player, hand, laid in zip(proto.players, view.hands, view.laid_out, strict=True):
            assert _counts(list(player.buttons)) == hand
            assert [card_from_proto(c.card) for c in player.cards] == [x.card for x in laid]
            assert [_counts(list(c.buttons)) for c in player.cards] == [x.buttons for x in laid]
        assert (proto.centre, proto.reserve, proto.deck_left) == (
            view.centre, view.reserve, view.deck_left)
        assert proto.HasField("to_move") == (view.to_move is not None)
        if step % 10 == 0 or state.phase == "over":
            console.print(screen.render(pb.GameView(boutons=proto, your_seat=0)))
        if state.phase == "over":
            break
        (seat,) = RULES.to_act(state)
        for action in RULES.legal_actions(state, seat):
            message = ADAPTER.action_to_proto(action)
            assert ADAPTER.action_from_proto(message) == action
            assert screen.describe_action(pb.Action(boutons=message))
        action = RULES.bot_action(state, seat, "random", rng.derive(seed, step))
        step += 1
        state, events = RULES.apply(state, seat, action)
    assert {"reserve_to_centre", "bet_placed", "draw_started", "card_flipped",
            "round_ended", "ended"} <= kinds
    text = console.export_text()
    assert "La bataille des boutons" in text and "game over" in text
    assert proto.winners == list(RULES.outcome(state).winners)  # type: ignore[union-attr]


def test_hotkeys_are_unique_per_seat() -> None:
    state, _ = RULES.start(GameSetup(4, 1, BoutonsOptions()))
    keys = [screen.hotkey(pb.Action(boutons=ADAPTER.action_to_proto(a)))
            for a in RULES.legal_actions(state, 0)]
    assert len(keys) == len(set(keys)) == 32
    assert screen.hotkey(pb.Action(boutons=ADAPTER.action_to_proto(Flip()))) == "f"


def test_bet_proto_round_trip() -> None:
    bet = Bet("reserve", parse_card("QS"))
    message = ADAPTER.action_to_proto(bet)
    assert message.bet.colour == boutons_pb2.BOUTONS_COLOUR_RESERVE
    assert ADAPTER.action_from_proto(message) == bet


@pytest.mark.parametrize("message", [
    boutons_pb2.BoutonsAction(),
    boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(card=ADAPTER.action_to_proto(
        Bet("red", parse_card("JC"))).bet.card)),
    boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(
        colour=boutons_pb2.BOUTONS_COLOUR_RED)),
])
def test_malformed_actions_are_invalid(message: boutons_pb2.BoutonsAction) -> None:
    with pytest.raises(RuleError) as error:
        ADAPTER.action_from_proto(message)
    assert error.value.reason == Reason.INVALID_ACTION


def test_options() -> None:
    assert ADAPTER.options_from_proto(None) == BoutonsOptions()
    assert ADAPTER.options_from_proto(boutons_pb2.BoutonsOptions()) == BoutonsOptions()
    options = BoutonsOptions(rounds=3)
    assert ADAPTER.options_from_proto(ADAPTER.options_to_proto(options)) == options


def test_centre_taken_has_no_card() -> None:
    from tapis_engine.boutons import ButtonsTaken
    from tapis_engine.boutons.state import RESERVE_INDEX

    counts = tuple(2 if i == RESERVE_INDEX else 0 for i in range(len(ALL_COLOURS)))
    message = ADAPTER.event_to_proto(ButtonsTaken(1, None, counts)).buttons_taken
    assert not message.HasField("card")
    assert list(message.buttons) == [boutons_pb2.BoutonsButtonPile(
        colour=boutons_pb2.BOUTONS_COLOUR_RESERVE, count=2)]
    line = screen.describe_event(pb.Event(boutons=ADAPTER.event_to_proto(
        ButtonsTaken(1, None, counts))), 1)
    assert line is not None and "centre" in line and line.startswith("you take")
