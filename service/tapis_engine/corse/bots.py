"""Server-side Bataille Corse bots. They read only what every seat sees: the face-up cards of
the pile, whose flip it is and the seats' statuses (never a deck's order).

The reaction delay is the server's business; a bot only says what it would do now.
"""

from __future__ import annotations

from tapis_engine import rng
from tapis_engine.corse.combinations import find_combination
from tapis_engine.corse.state import OUT, CorseAction, CorseState, Flip, Slap

STRATEGIES: tuple[str, ...] = ("reflex", "random", "sloppy")
"""reflex: slaps every combination, else flips when due (never wrong).
random: flips when due; otherwise slaps a face-up top card with probability 1/4, combination
or not. sloppy: like reflex but misses 1 combination in 5 and slaps falsely 1 time in 25."""

_SCALE = 1 << 64


def _chance(seed: int, numerator: int, denominator: int) -> bool:
    value, _ = rng.next_u64(seed)
    return value * denominator < numerator * _SCALE


def bot_action(state: CorseState, seat: int, strategy: str, seed: int) -> CorseAction | None:
    """The bot's move for ``seat`` now, or None. Unknown strategies play as "reflex"."""
    if state.end is not None or state.statuses[seat] == OUT:
        return None
    top = state.top_sequence
    due = state.turn == seat
    if strategy == "random":
        if top is not None and _chance(seed, 1, 4):
            return Slap(top)
        return Flip() if due else None
    combination = None if top is None else find_combination(state.face_up_cards(),
                                                            state.combinations)
    if strategy == "sloppy":
        if top is not None:
            if combination is not None and not _chance(seed, 1, 5):
                return Slap(top)
            if combination is None and _chance(rng.derive(seed, 1), 1, 25):
                return Slap(top)
        return Flip() if due else None
    if combination is not None and top is not None:
        return Slap(top)
    return Flip() if due else None
