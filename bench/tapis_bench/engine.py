"""Engine cost: full games of every registered kind by random play, in-process (no gRPC).

Each action goes through ``table.step`` (what the service runs per action: rules, events,
deadlines, the new table); the time of the random choice itself is left out. Per-action times
are this thread's CPU time (the machine is shared: time spent preempted is not the engine's).
"""

from __future__ import annotations

import random
import time
from typing import Any

from tapis_engine import table as tbl
from tapis_engine.protocol import GameSetup, Rules
from tapis_engine.registry import GAMES

MAX_ACTIONS = 20_000
"""A random game longer than this is cut short (counted, not finished)."""


def play_one(rules: Rules[Any, Any, Any], seed: int, seats: int) -> tuple[int, float, float]:
    """One random game; (actions, seconds in table.step, seconds in rules.apply alone)."""
    rng = random.Random(seed)
    setup = GameSetup(seats=seats, seed=seed, options=rules.default_options())
    table, _ = tbl.new_table(rules, setup, [None] * seats, 0, 0)
    for seat in range(seats):
        table, _ = tbl.step(rules, table, tbl.Claim(seat), 0)
    actions = 0
    in_step = in_apply = 0.0
    clock = time.thread_time  # CPU time of this thread: other processes' load is left out
    while actions < MAX_ACTIONS and not table.game_over(rules):
        awaited = sorted(rules.to_act(table.state)) or list(range(seats))
        seat = rng.choice(awaited)
        legal = rules.legal_actions(table.state, seat)
        if not legal:
            continue
        action = rng.choice(list(legal))
        state = table.state
        began = clock()
        rules.apply(state, seat, action)
        middle = clock()
        table, _ = tbl.step(rules, table, tbl.Act(seat, action), actions)
        ended = clock()
        in_apply += middle - began
        in_step += ended - middle
        actions += 1
    return actions, in_step, in_apply


def run(seconds: float, kinds: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Play games of each kind for about ``seconds`` each."""
    results: dict[str, dict[str, Any]] = {}
    for kind, rules in sorted(GAMES.items()):
        if kinds and kind not in kinds:
            continue
        games = actions = 0
        in_step = in_apply = 0.0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds or games == 0:
            n, step_s, apply_s = play_one(rules, 10_000 + games, rules.min_seats)
            games += 1
            actions += n
            in_step += step_s
            in_apply += apply_s
        wall = time.perf_counter() - began
        results[kind] = {
            "games": games, "actions": actions, "games_per_s": round(games / wall, 1),
            "actions_per_game": round(actions / games, 1),
            "us_per_action": round(in_step / actions * 1e6, 2),
            "rules_apply_us_per_action": round(in_apply / actions * 1e6, 2),
        }
    return results
