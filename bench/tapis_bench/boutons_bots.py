"""Measurements for La bataille des boutons (not a test): engine speed and the heuristic bot.

    .venv/bin/python -m tapis_bench.boutons_bots speed [GAMES]
    .venv/bin/python -m tapis_bench.boutons_bots winrate [GAMES]

``speed``: seeded random play with 2, 3 and 4 players, average CPU µs per action (to_act, the random
bot's pick and apply), best of three runs. ``winrate``: one heuristic seat (rotating) against
random bots; win share (a shared win counts 1/k) against the fair share, and the mean product
score of that seat against an all-random replay of the same seed.
"""

from __future__ import annotations

import math
import sys
import time

from tapis_engine import rng
from tapis_engine.boutons import RULES, BoutonsOptions
from tapis_engine.protocol import GameSetup, Outcome


def play(seats: int, seed: int, strategies: tuple[str, ...]) -> tuple[Outcome, int]:
    state, _ = RULES.start(GameSetup(seats, seed, BoutonsOptions()))
    steps = 0
    while state.phase != "over":
        (seat,) = RULES.to_act(state)
        action = RULES.bot_action(state, seat, strategies[seat], rng.derive(seed, steps))
        assert action is not None, "an awaited seat's bot always moves"
        state, _ = RULES.apply(state, seat, action)
        steps += 1
    outcome = RULES.outcome(state)
    assert outcome is not None
    return outcome, steps


def speed(games: int) -> None:
    runs = []
    for _ in range(3):
        actions = 0
        elapsed = 0.0
        for seats in (2, 3, 4):
            for game in range(games):
                state, _ = RULES.start(GameSetup(seats, game, BoutonsOptions()))
                begin = time.process_time()
                step = 0
                while state.phase != "over":
                    (seat,) = RULES.to_act(state)
                    action = RULES.bot_action(state, seat, "random", step)
                    assert action is not None, "an awaited seat's bot always moves"
                    state, _ = RULES.apply(state, seat, action)
                    step += 1
                elapsed += time.process_time() - begin
                actions += step
        runs.append((elapsed / actions * 1e6, actions))
    best = min(runs)
    print(f"{best[1]} actions per run, best of 3: {best[0]:.1f} µs/action")


def winrate(games: int) -> None:
    for seats in (2, 3, 4):
        wins = 0.0
        log_gain = 0.0
        mine = theirs = 0
        for game in range(games):
            seat = game % seats
            mixed = tuple("heuristic" if s == seat else "random" for s in range(seats))
            outcome, _ = play(seats, 50_000 + game, mixed)
            baseline, _ = play(seats, 50_000 + game, ("random",) * seats)
            if seat in outcome.winners:
                wins += 1 / len(outcome.winners)
            mine += outcome.scores[seat]
            theirs += baseline.scores[seat]
            log_gain += math.log1p(outcome.scores[seat]) - math.log1p(baseline.scores[seat])
        print(f"{seats} players, {games} games: heuristic wins {wins / games:.3f} "
              f"(fair share {1 / seats:.3f}); mean score {mine / games:.1f} vs "
              f"{theirs / games:.1f} for random in the same seat; "
              f"mean log(1+score) gain {log_gain / games:+.3f}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "speed"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else (200 if what == "speed" else 1000)
    speed(count) if what == "speed" else winrate(count)
