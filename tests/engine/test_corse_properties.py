"""Bataille Corse properties over seeded random play (2 to 6 players, true and false slaps):
conservation of the 54 cards, determinism, snapshot round-trip, no face-down card shown."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis_engine.cards import Card, deck_with_jokers
from tapis_engine.corse import RULES, CardFlipped, CorseOptions, CorseState, Flip, PileWon, Slap
from tapis_engine.corse.combinations import find_combination
from tapis_engine.corse.rules import _Play
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup

FULL_DECK = sorted(deck_with_jokers())


def choose(state: CorseState, chooser: random.Random) -> tuple[int, Any]:
    """A random move: mostly the due flip, sometimes a slap (true or false) from any seat."""
    seats = len(state.decks)
    if state.face_up and chooser.random() < 0.35:
        slappers = [s for s in range(seats) if state.statuses[s] != "out"]
        if slappers:
            combo = find_combination(state.face_up_cards(), state.combinations)
            # Slap true combinations often, false ones rarely, so that games end.
            if combo is not None or chooser.random() < 0.15:
                return chooser.choice(slappers), Slap(state.sequence)
    assert state.turn is not None
    return state.turn, Flip()


def play(seed: int, seats: int, *, check: bool = False, disturb: bool = False,
         flip_cap: int = 10_000) -> tuple[CorseState, list[Any], list[tuple[int, Any]]]:
    chooser = random.Random(seed)
    state, events = RULES.start(GameSetup(seats, seed, CorseOptions(flip_cap=flip_cap)))
    moves: list[tuple[int, Any]] = []
    face_up_model: list[Card] = []
    while state.end is None:
        seat, action = choose(state, chooser)
        if check:
            assert action in RULES.legal_actions(state, seat)
        if disturb:
            random.seed(len(moves) * 7919)
        previous = state
        state, new_events = RULES.apply(state, seat, action)
        moves.append((seat, action))
        events.extend(new_events)
        if check:
            check_step(previous, state, new_events, face_up_model)
            if isinstance(action, Flip):  # the direct path for plain flips agrees
                slow = _Play(previous)
                slow.flip(seat)
                assert (slow.freeze(previous), slow.events) == (state, new_events)
    return state, events, moves


def check_step(previous: CorseState, state: CorseState, events: list[Any],
               face_up_model: list[Card]) -> None:
    # The 54 cards are all present (decks + pile).
    assert sorted([c for deck in state.decks for c in deck] + list(state.pile)) == FULL_DECK
    assert 0 <= state.face_up <= len(state.pile)
    # Events only name face-up cards; redaction keeps them as they are.
    for event in events:
        cards = [v for v in dataclasses.astuple(event) if isinstance(v, Card)]
        assert not cards or isinstance(event, CardFlipped)
        for seat in (None, *range(len(state.decks))):
            assert RULES.redact(event, seat) == event
        if isinstance(event, CardFlipped):
            face_up_model.append(event.card)
            assert event.sequence == previous.sequence + 1
            previous = dataclasses.replace(previous, sequence=event.sequence)
        elif isinstance(event, PileWon):
            face_up_model.clear()
    # The view shows exactly the cards flipped face up since the pile was last taken.
    view = RULES.view(state, 0)
    assert list(view.pile_top) == face_up_model
    assert view.pile_size == len(state.pile)
    assert sum(view.deck_sizes) + view.pile_size == 54
    # Cardless seats are never left to flip, unless drawing owed tries from someone.
    if state.end is None:
        assert state.turn is not None and state.statuses[state.turn] == "in_play"
        if not state.decks[state.turn]:
            assert state.challenger is not None
        assert sum(s == "in_play" for s in state.statuses) >= 2
    # Eliminated and out seats hold no cards.
    for seat, status in enumerate(state.statuses):
        if status != "in_play":
            assert state.decks[seat] == ()
    # Snapshot round-trip through JSON.
    assert RULES.decode_state(json.loads(json.dumps(RULES.encode_state(state)))) == state
    # A slap naming an older card is too late and changes nothing.
    if state.end is None and state.sequence > 1:
        try:
            RULES.apply(state, 0 if state.statuses[0] != "out" else state.turn or 0,
                        Slap(state.sequence - 1))
        except RuleError as error:
            assert error.reason in (Reason.SLAP_TOO_LATE, Reason.SEAT_OUT)
        else:
            raise AssertionError("an old sequence was accepted")


@pytest.mark.parametrize("seats", [2, 3, 4, 5, 6])
def test_seeded_random_play_reaches_the_end_with_every_invariant(seats: int) -> None:
    for seed in range(3):
        state, _, _ = play(seed * 31 + seats, seats, check=True)
        outcome = RULES.outcome(state)
        assert outcome is not None
        assert sum(outcome.scores) + len(state.pile) == 54
        if state.end == "last_in_play":
            assert outcome.winners and outcome.scores[outcome.winners[0]] == 54
        assert RULES.to_act(state) == frozenset()
        for seat in range(seats):
            assert RULES.legal_actions(state, seat) == []
            assert RULES.bot_action(state, seat, "reflex", 1) is None


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), seats=st.integers(2, 6))
def test_property_conservation_and_views(seed: int, seats: int) -> None:
    state, _, _ = play(seed, seats, check=True, flip_cap=1000)
    assert state.end is not None


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), seats=st.integers(2, 6))
def test_same_seed_and_actions_give_the_same_game_despite_the_global_rng(seed: int,
                                                                        seats: int) -> None:
    first_state, first_events, moves = play(seed, seats, flip_cap=2000)
    state, events = RULES.start(GameSetup(seats, seed, CorseOptions(flip_cap=2000)))
    for seat, action in moves:
        random.seed(seat * 7919 + len(events))  # disturb the global RNG between steps
        state, new_events = RULES.apply(state, seat, action)
        events.extend(new_events)
    assert events == first_events and state == first_state
    _, disturbed_events, _ = play(seed, seats, disturb=True, flip_cap=2000)
    assert disturbed_events == first_events


def test_restored_snapshot_plays_on_identically() -> None:
    state, _, moves = play(11, 4, flip_cap=2000)
    replay, _ = RULES.start(GameSetup(4, 11, CorseOptions(flip_cap=2000)))
    for index, (seat, action) in enumerate(moves):
        if index % 50 == 0:
            replay = RULES.decode_state(json.loads(json.dumps(RULES.encode_state(replay))))
        replay, _ = RULES.apply(replay, seat, action)
    assert replay == state


def test_mid_challenge_draws_happen_in_random_play() -> None:
    draws = 0
    for seed in range(40):
        _, events, _ = play(seed, 2 + seed % 5)
        draws += sum(1 for e in events if isinstance(e, CardFlipped) and e.drawn_from is not None)
    assert draws > 0


@pytest.mark.parametrize("seats", [2, 4, 6])
def test_bots_play_to_the_end(seats: int) -> None:
    for seed in range(4):
        state, _ = RULES.start(GameSetup(seats, seed, RULES.default_options()))
        strategies = RULES.bot_strategies
        steps = 0
        while state.end is None:
            moves = [(seat, RULES.bot_action(state, seat, strategies[seat % len(strategies)],
                                             seed * 1000 + steps))
                     for seat in range(seats)]
            moves = [(seat, action) for seat, action in moves if action is not None]
            assert moves  # the seat due always has a move
            seat, action = moves[steps % len(moves)]
            assert action in RULES.legal_actions(state, seat)
            state, _ = RULES.apply(state, seat, action)
            steps += 1
        assert RULES.outcome(state) is not None
