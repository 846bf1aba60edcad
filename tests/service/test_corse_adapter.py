"""Bataille Corse protobuf adapter (and the client's presentation of its messages) over seeded
games: events, views and actions to proto, actions and options back."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients.games import corse as corse_client
from tapis_clients.strategies import corse as corse_bot
from tapis_engine import corse
from tapis_engine.cards import parse_card
from tapis_engine.corse import RULES, CorseOptions, Flip, Slap
from tapis_engine.corse.combinations import find_combination
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup
from tapis_service.codec.adapters.cards import card_from_proto
from tapis_service.codec.adapters.corse import COMBINATION_TO_PROTO, CorseAdapter

ADAPTER = CorseAdapter()


def seeded_game(seed: int, seats: int) -> list[tuple[corse.CorseState, list[Any]]]:
    """(state, events) after each step of a seeded random game, slaps true and false."""
    chooser = random.Random(seed)
    state, events = RULES.start(GameSetup(seats, seed, CorseOptions(flip_cap=1500)))
    steps = [(state, events)]
    while state.end is None:
        legal = [(s, a) for s in range(seats) for a in RULES.legal_actions(state, s)]
        slaps = [(s, a) for s, a in legal if isinstance(a, Slap)]
        combo = find_combination(state.face_up_cards(), state.combinations)
        if slaps and (combo is not None or chooser.random() < 0.05):
            seat, action = chooser.choice(slaps)
        else:
            seat, action = state.turn, Flip()
        state, events = RULES.apply(state, seat, action)
        steps.append((state, events))
    return steps


def render_text(view: pb.GameView) -> str:
    console = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(corse_client.render(view))
    return console.export_text()


def test_identity() -> None:
    assert ADAPTER.kind == "bataille-corse"
    assert ADAPTER.proto_kind == pb.GAME_KIND_BATAILLE_CORSE
    assert ADAPTER.field == "bataille_corse"


@pytest.mark.parametrize(("seed", "seats"), [(1, 2), (2, 3), (3, 4), (4, 6)])
def test_events_and_views_convert_over_seeded_games(seed: int, seats: int) -> None:
    kinds: set[str] = set()
    for state, events in seeded_game(seed, seats):
        for event in events:
            message = ADAPTER.event_to_proto(RULES.redact(event, 0))
            which = message.WhichOneof("event")
            assert which is not None
            kinds.add(which)
            if isinstance(event, corse.CardFlipped):
                flipped = message.card_flipped
                assert card_from_proto(flipped.card) == event.card
                assert flipped.pile_sequence == event.sequence
                assert flipped.HasField("drawn_from") == (event.drawn_from is not None)
            elif isinstance(event, corse.PileWon):
                won = message.pile_won
                assert (won.seat, won.cards) == (event.seat, event.cards)
                assert list(won.deck_sizes) == list(event.deck_sizes)
                if event.reason in COMBINATION_TO_PROTO:
                    assert won.combination == COMBINATION_TO_PROTO[event.reason]
            elif isinstance(event, corse.FalseSlap):
                assert message.false_slap.penalty_cards == event.penalty_cards
                # The message has no field that could carry a (face-down) card.
                fields = corse_pb2.BatailleCorseFalseSlap.DESCRIPTOR.fields
                assert all(field.message_type is None for field in fields)
            wrapped = pb.Event(sequence=1, bataille_corse=message)
            line = corse_client.describe_event(wrapped, 0)
            assert line is None or isinstance(line, str)
        view = RULES.view(state, 0)
        proto = ADAPTER.view_to_proto(view)
        assert [card_from_proto(c) for c in proto.pile_top] == list(view.pile_top)
        assert proto.pile_size == view.pile_size
        assert list(proto.deck_sizes) == list(view.deck_sizes)
        assert proto.HasField("top_sequence") == (view.top_sequence is not None)
        assert proto.HasField("turn") == (view.turn is not None)
        assert proto.HasField("challenger") == (view.challenger is not None)
        assert [s.deck_size for s in proto.seats] == list(view.deck_sizes)
        # The client judges combinations from the view exactly as the engine does.
        combo = find_combination(view.pile_top, state.combinations)
        shown = corse_bot.showing(proto)
        assert shown == (None if combo is None else COMBINATION_TO_PROTO[combo])
    assert {"dealt", "card_flipped", "pile_won", "ended"} <= kinds
    text = render_text(pb.GameView(kind=pb.GAME_KIND_BATAILLE_CORSE, bataille_corse=proto))
    assert ("Bataille Corse" in text and "wins" in text) or "draw" in text


def test_pile_won_lines_say_why() -> None:
    message = ADAPTER.event_to_proto(corse.PileWon(2, "sandwich", 5, (10, 10, 15)))
    line = corse_client.describe_event(pb.Event(bataille_corse=message), None)
    assert line is not None and "seat 2 takes the pile (sandwich)" in line
    message = ADAPTER.event_to_proto(corse.PileWon(1, "challenge", 3, (10, 10, 15)))
    assert message.pile_won.reason == corse_pb2.BATAILLE_CORSE_PILE_REASON_CHALLENGE
    line = corse_client.describe_event(pb.Event(bataille_corse=message), None)
    assert line is not None and "(challenge)" in line


def test_actions_round_trip_and_hotkeys() -> None:
    for action in (Flip(), Slap(0), Slap(12345678901)):
        message = ADAPTER.action_to_proto(action)
        assert ADAPTER.action_from_proto(message) == action
        wrapped = pb.Action(bataille_corse=message)
        assert corse_client.hotkey(wrapped) == ("f" if isinstance(action, Flip) else "s")
        assert corse_client.describe_action(wrapped)
    with pytest.raises(RuleError) as caught:
        ADAPTER.action_from_proto(corse_pb2.BatailleCorseAction())
    assert caught.value.reason == Reason.INVALID_ACTION


def test_options_round_trip() -> None:
    assert ADAPTER.options_from_proto(None) == CorseOptions()
    assert ADAPTER.options_from_proto(corse_pb2.BatailleCorseOptions()) == CorseOptions()
    options = CorseOptions(frozenset({"seven", "double"}), 500)
    message = ADAPTER.options_to_proto(options)
    assert len(message.disabled_combinations) == 4
    assert ADAPTER.options_from_proto(message) == options
    with pytest.raises(RuleError) as caught:
        ADAPTER.options_from_proto(corse_pb2.BatailleCorseOptions(disabled_combinations=[0]))
    assert caught.value.reason == Reason.INVALID_OPTIONS


def test_client_bot_slaps_what_shows_and_flips_when_due() -> None:
    state = corse.CorseState(
        decks=((), (), ()), pile=(), face_up=0, sequence=0, turn=1, challenger=None, tries=0,
        statuses=("in_play",) * 3, strikes=(0, 0, 0), rng=1,
        combinations=RULES.default_options().combinations, flip_cap=100)
    seven = replace(state, pile=(parse_card("7C"),), face_up=1, sequence=1)
    for game, expected in ((state, "flip"), (seven, "slap")):
        view = ADAPTER.view_to_proto(RULES.view(game, 1))
        legal = [pb.Action(bataille_corse=ADAPTER.action_to_proto(a))
                 for a in RULES.legal_actions(game, 1)]
        game_view = pb.GameView(bataille_corse=view, legal_actions=legal)
        picked = corse_bot.slap_or_flip(game_view, legal)
        assert picked is not None
        assert picked.bataille_corse.WhichOneof("action") == expected
    # A bot following the stream sees the flipped seven and may slap it, naming its sequence.
    follower = corse_bot.CorseFollower(pb.GameView(
        your_seat=2, status=pb.GAME_STATUS_IN_PROGRESS, last_sequence=0,
        bataille_corse=ADAPTER.view_to_proto(RULES.view(state, 2))))
    follower.apply(pb.Event(sequence=1, version=1, awaiting_seats=[2],
                            bataille_corse=ADAPTER.event_to_proto(
                                corse.CardFlipped(0, parse_card("7C"), 1, None))))
    moves = [a.bataille_corse.WhichOneof("action") for a in follower.legal_actions()]
    assert moves == ["flip", "slap"]
    picked = corse_bot.slap_or_flip(follower.view, follower.legal_actions())
    assert picked is not None and picked.bataille_corse.slap.pile_sequence == 1
