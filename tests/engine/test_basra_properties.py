"""Basra properties over seeded random games: conservation, deal points, hidden cards, snapshots,
determinism."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis_engine import rng
from tapis_engine.basra import RULES, BasraOptions, BasraState
from tapis_engine.basra.state import BasraScored, DealScored, HandsDealt
from tapis_engine.cards import Card, standard_deck
from tapis_engine.protocol import GameSetup
from tests.support.cards import cards_in

VARIANTS = [BasraOptions(), BasraOptions(variant="lebanese"), BasraOptions(variant="iraqi"),
            BasraOptions(two_card_jack_basra=True, target=151)]


def play_game(seats: int, seed: int, options: BasraOptions, check: bool = True,
              strategy: str = "random") -> tuple[BasraState, list[Any], int]:
    state, events = RULES.start(GameSetup(seats, seed, options))
    log = list(events)
    actions = 0
    bot_seed = seed
    while not state.over:
        seat = state.to_move
        assert seat is not None
        bot_seed, _ = rng.next_u64(bot_seed)
        action = RULES.bot_action(state, seat, strategy, bot_seed)
        assert action in RULES.legal_actions(state, seat)
        before = state
        state, events = RULES.apply(state, seat, action)
        actions += 1
        log += events
        if check:
            assert before == RULES.decode_state(RULES.encode_state(before))
            check_state(before, state, events, action.card)
    return state, log, actions


def hidden_from(state: BasraState, viewer: int | None) -> set[Card]:
    hidden = {c for s, hand in enumerate(state.hands) if s != viewer for c in hand}
    return hidden | set(state.stock)


def check_state(before: BasraState, state: BasraState, events: list[Any], played: Card) -> None:
    everything = ([c for h in state.hands for c in h] + list(state.floor) + list(state.stock)
                  + [c for pile in state.captured for c in pile])
    assert sorted(everything) == sorted(standard_deck()), "every deal accounts for all 52 cards"
    for viewer in [None, *range(state.seats)]:
        own = set(state.hands[viewer]) if viewer is not None else set()
        view = RULES.view(state, viewer)
        assert set(cards_in(view)) <= own | set(state.floor)
        for event in events:
            shown = RULES.redact(event, viewer)
            # Hidden before the action and still hidden after it (a new deal reshuffles).
            hidden = (hidden_from(before, viewer) & hidden_from(state, viewer)) - {played}
            if isinstance(event, HandsDealt):
                for s, hand in enumerate(shown.hands):
                    assert hand is None or s == viewer
            else:
                assert not set(cards_in(shown)) & hidden


def deal_points_hold(options: BasraOptions, log: list[Any]) -> int:
    """Each deal's points = 43 (Iraqi 46) + basras, or 13 (16) + basras if nobody has most."""
    base = 46 if options.variant == "iraqi" else 43
    per_basra = 5 if options.variant == "iraqi" else 10
    basras = 0
    deals = 0
    for event in log:
        if isinstance(event, BasraScored):
            basras += 1
        if isinstance(event, DealScored):
            total = sum(line.points for line in event.lines)
            most = any(line.most_cards for line in event.lines)
            assert total == (base if most else base - 30) + per_basra * basras
            assert sum(line.cards for line in event.lines) == 52
            basras = 0
            deals += 1
    return deals


@pytest.mark.parametrize("seats", [2, 3, 4])
@pytest.mark.parametrize("options", VARIANTS, ids=lambda o: f"{o.variant}-{o.target}")
def test_seeded_random_play_to_the_end(seats: int, options: BasraOptions) -> None:
    state, log, actions = play_game(seats, 1000 + seats, options)
    assert state.over and actions > 0
    outcome = RULES.outcome(state)
    assert outcome is not None and outcome.winners
    assert max(state.scores) >= options.target
    assert deal_points_hold(options, log) >= 1


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.integers(0, 2**63), st.sampled_from([2, 3, 4]), st.sampled_from(VARIANTS))
def test_deal_points_and_conservation_over_seeds(seed: int, seats: int,
                                                 options: BasraOptions) -> None:
    _, log, _ = play_game(seats, seed, options, check=False)
    assert deal_points_hold(options, log) >= 1


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_same_seed_and_actions_give_the_same_events(seats: int) -> None:
    random.seed(1)
    _, first, _ = play_game(seats, 77, BasraOptions(), check=False)
    random.seed(2)
    random.random()
    _, second, _ = play_game(seats, 77, BasraOptions(), check=False)
    assert first == second
    _, other, _ = play_game(seats, 78, BasraOptions(), check=False)
    assert other != first


def test_snapshot_round_trip_mid_game_continues_identically() -> None:
    state, _ = RULES.start(GameSetup(3, 5, BasraOptions(variant="iraqi")))
    for step in range(30):
        state, _ = RULES.apply(state, state.to_move, RULES.legal_actions(state,
                                                                         state.to_move)[-1])
        assert step >= 0
    restored = RULES.decode_state(json.loads(json.dumps(RULES.encode_state(state))))
    assert restored == state
    action = RULES.legal_actions(state, state.to_move)[0]
    assert RULES.apply(restored, restored.to_move, action) == RULES.apply(state, state.to_move,
                                                                           action)


def test_apply_never_mutates_its_input() -> None:
    state, _ = RULES.start(GameSetup(2, 6, BasraOptions()))
    snapshot = RULES.encode_state(state)
    for action in RULES.legal_actions(state, state.to_move):
        RULES.apply(state, state.to_move, action)
    assert RULES.encode_state(state) == snapshot


def test_heuristic_beats_random_most_of_the_time() -> None:
    wins = 0
    games = 20
    for seed in range(games):
        state, _ = RULES.start(GameSetup(2, seed, BasraOptions()))
        heuristic_seat = seed % 2
        bot_seed = seed
        while not state.over:
            seat = state.to_move
            bot_seed, _ = rng.next_u64(bot_seed)
            strategy = "heuristic" if seat == heuristic_seat else "random"
            state, _ = RULES.apply(state, seat, RULES.bot_action(state, seat, strategy,
                                                                 bot_seed))
        wins += state.winners == (heuristic_seat,)
    assert wins >= 15
