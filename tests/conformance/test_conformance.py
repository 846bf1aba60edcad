"""One conformance suite over every game (STYLE.md habit 9, after OpenSpiel's random_sim_test).

For each registered game and each seat count: seeded random play to the end through the pure
table, checking at every step (every 25th after the first 300, to keep long games fast) that
- no view or redacted event shows a card its recipient could not have seen (a card is seeable
  once it has appeared in the spectator's record, or when it is the recipient's own private
  card, as the game's descriptor says);
- every legal action applies; illegal ones raise and change nothing; an awaited seat can always
  make the game's routine action, when its descriptor names one;
- the state survives a JSON snapshot round-trip;
and then that a replay of the same actions gives the same game event for event, even with the
global ``random`` disturbed between steps (RLCard's determinism test).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.cards import Card
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup, Rules
from tapis_engine.registry import BY_KIND, GAMES
from tests.support.cards import cards_in

MAX_STEPS = 60_000


def cases() -> list[tuple[str, int]]:
    out = []
    for kind, rules in sorted(GAMES.items()):
        for seats in range(rules.min_seats, rules.max_seats + 1):
            out.append((kind, seats))
    return out


def candidates(rules: Rules[Any, Any, Any], table: tbl.Table) -> list[tuple[int, Any]]:
    """Every (seat, legal action), awaited seats first."""
    awaited = rules.to_act(table.state)
    pairs = [(s, a) for s in sorted(awaited) for a in rules.legal_actions(table.state, s)]
    others = [(s, a) for s in range(len(table.seats)) if s not in awaited
              for a in rules.legal_actions(table.state, s)]
    return pairs + others


def pick(rng: random.Random, rules: Rules[Any, Any, Any],
         table: tbl.Table) -> tuple[int, Any]:
    """Mostly the awaited seats' moves; sometimes another seat's (a slap)."""
    awaited = rules.to_act(table.state)
    options = candidates(rules, table)
    main = [p for p in options if p[0] in awaited]
    if main and (rng.random() < 0.85 or len(main) == len(options)):
        return rng.choice(main)
    return rng.choice(options)


def play(kind: str, seats: int, seed: int, disturb: bool = False, check: bool = False
         ) -> tuple[tbl.Table, list[tbl.TableEvent]]:
    rules = GAMES[kind]
    rng = random.Random(seed)
    setup = GameSetup(seats, seed, rules.default_options())
    table, events = tbl.new_table(rules, setup, [None] * seats, 0, 0)
    for seat in range(seats):
        table, more = tbl.step(rules, table, tbl.Claim(seat), 0)
        events += more
    public: set[Card] = set()
    if check:
        _check_views(rules, table, events, public)
    steps = 0
    while not table.game_over(rules):
        steps += 1
        assert steps < MAX_STEPS, f"{kind} did not end in {MAX_STEPS} steps"
        seat, action = pick(rng, rules, table)
        if disturb:
            random.seed(random.random() * steps)
            random.random()
        table, new = tbl.step(rules, table, tbl.Act(seat, action), steps)
        events += new
        if check and (steps <= 300 or steps % 25 == 0):
            _check_views(rules, table, new, public)
            _check_illegal_changes_nothing(rules, table)
            _check_round_trip(rules, table)
    return table, events


def _check_views(rules: Rules[Any, Any, Any], table: tbl.Table, events: list[tbl.TableEvent],
                 public: set[Card]) -> None:
    state = table.state
    game_events = [e.body for e in events if not _is_table_event(e.body)]
    for event in game_events:
        public.update(cards_in(rules.redact(event, None)))
    public.update(cards_in(rules.view(state, None)))
    hook = BY_KIND[rules.kind].private_cards
    for seat in range(len(table.seats)):
        own = set(hook(state, seat)) if hook else set()
        seen = set(cards_in(rules.view(state, seat)))
        for event in game_events:
            seen.update(cards_in(rules.redact(event, seat)))
        leaked = seen - public - own
        assert not leaked, f"seat {seat} sees {sorted(map(str, leaked))}"
        assert list(rules.legal_actions(state, seat)) == list(rules.legal_actions(state, seat))
    routine = BY_KIND[rules.kind].routine_action
    if routine is not None:
        for seat in rules.to_act(state):
            assert routine in rules.legal_actions(state, seat), f"seat {seat} cannot {routine}"


def _is_table_event(body: Any) -> bool:
    return isinstance(body, (tbl.SeatClaimed, tbl.GameStarted, tbl.SeatTakenOver,
                             tbl.SeatReclaimed, tbl.SeatReplaced, tbl.GameEnded))


def _check_illegal_changes_nothing(rules: Rules[Any, Any, Any], table: tbl.Table) -> None:
    if table.game_over(rules):
        return
    before = rules.encode_state(table.state)
    awaited = rules.to_act(table.state)
    for seat in range(len(table.seats)):
        if seat in awaited or rules.legal_actions(table.state, seat):
            continue
        for other in sorted(awaited):
            for action in list(rules.legal_actions(table.state, other))[:1]:
                with pytest.raises(RuleError):
                    rules.apply(table.state, seat, action)
        break
    assert rules.encode_state(table.state) == before


def _check_round_trip(rules: Rules[Any, Any, Any], table: tbl.Table) -> None:
    data = json.loads(json.dumps(table_codec.encode_table(rules, table)))
    assert table_codec.decode_table(rules, data) == table


@pytest.mark.parametrize(("kind", "seats"), cases())
def test_random_play_to_the_end_hides_what_it_must(kind: str, seats: int) -> None:
    rules = GAMES[kind]
    table, events = play(kind, seats, seed=1000 + seats, check=True)
    outcome = rules.outcome(table.state)
    assert outcome is not None
    assert len(outcome.scores) == seats
    assert set(outcome.winners) <= set(range(seats))
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[-1].body, tbl.GameEnded)


@pytest.mark.parametrize(("kind", "seats"), cases())
def test_same_seed_same_actions_same_game_despite_a_disturbed_global_rng(
        kind: str, seats: int) -> None:
    rules = GAMES[kind]
    first_table, first_events = play(kind, seats, seed=7 + seats)
    second_table, second_events = play(kind, seats, seed=7 + seats, disturb=True)
    assert first_events == second_events
    assert rules.encode_state(first_table.state) == rules.encode_state(second_table.state)
    other_table, _ = play(kind, seats, seed=8 + seats)
    assert rules.encode_state(other_table.state) != rules.encode_state(first_table.state)


@pytest.mark.parametrize("kind", sorted(GAMES))
def test_server_bots_play_every_seat_to_the_end(kind: str) -> None:
    rules = GAMES[kind]
    for strategy in rules.bot_strategies:
        table, _ = tbl.new_table(rules, GameSetup(rules.min_seats, 3, rules.default_options()),
                                 [strategy] * rules.min_seats, 0, 0)
        steps = 0
        while not table.game_over(rules):
            seats = tbl.pending_bot_seats(rules, table)
            assert seats, f"{kind}/{strategy}: nobody can move"
            table, _ = tbl.step(rules, table, tbl.BotMove(seats[steps % len(seats)]), steps)
            steps += 1
            assert steps < MAX_STEPS
        assert rules.outcome(table.state) is not None
