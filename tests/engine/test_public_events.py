"""``Rules.hides_events``: a game that says it hides nothing gives every event back unchanged
from ``redact``, for every seat and for spectators (the service then sends one message to
every stream of its tables); a game that hides something does redact some event."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tapis_engine.protocol import GameSetup, Rules
from tapis_engine.registry import BY_KIND, GAMES


def events_of_random_games(rules: Rules[Any, Any, Any], seats: int, games: int,
                           moves: int) -> list[Any]:
    """Every event of ``games`` seeded games of random legal play (at most ``moves`` each)."""
    events: list[Any] = []
    for seed in range(games):
        chooser = random.Random(seed)
        state, dealt = rules.start(GameSetup(seats=seats, seed=seed,
                                             options=rules.default_options()))
        events.extend(dealt)
        for _ in range(moves):
            if rules.outcome(state) is not None:
                break
            choices = [(seat, action) for seat in sorted(rules.to_act(state))
                       for action in rules.legal_actions(state, seat)]
            if not choices:
                break
            seat, action = chooser.choice(choices)
            state, produced = rules.apply(state, seat, action)
            events.extend(produced)
    return events


@pytest.mark.parametrize("kind", sorted(GAMES))
def test_a_game_that_hides_nothing_redacts_nothing(kind: str) -> None:
    rules = GAMES[kind]
    seats = max(rules.min_seats, min(3, rules.max_seats))
    events = events_of_random_games(rules, seats, games=6, moves=400)
    assert len({type(e) for e in events}) >= 2  # the games went past their deal
    redacted = [e for e in events for seat in (None, *range(seats))
                if rules.redact(e, seat) is not e]
    if rules.hides_events:
        assert redacted, f"{kind} says it hides events but redacted none"
    else:
        assert not redacted, f"{kind} says it hides nothing but redacted {redacted[:1]}"


@pytest.mark.parametrize("kind", sorted(GAMES))
def test_only_a_game_with_private_cards_hides_events(kind: str) -> None:
    """Events are redacted only to hide a card some seat holds privately (a hand dealt): a
    game whose hidden cards are hidden from everyone names them in no event."""
    if GAMES[kind].hides_events:
        assert BY_KIND[kind].private_cards is not None
