"""Real-time actions: the ones limited per seat, and the latency probe of their outcome.

The one place the service knows which engine actions are played against the clock (a slap:
hammering the button is never a strategy, so it is rate limited per seat) and which event is
their outcome (the pile won after a slap, whose delay to the streams is a metric).
"""

from __future__ import annotations

from typing import Any

from tapis_engine import table as tbl
from tapis_engine.protocol import Rules
from tapis_service.session import Applied

RATE_LIMITED_ACTIONS = frozenset({"Slap"})
"""Engine action classes limited per seat."""
PROBED_OUTCOMES = frozenset({"PileWon"})
"""Engine event classes whose delay from the rate-limited action that caused them to the
streams is measured (``tapis_slap_to_pile_won_seconds``)."""


def is_rate_limited(rules: Rules[Any, Any, Any], move: tbl.Input) -> bool:
    """Whether ``move`` is an action limited per seat."""
    return isinstance(move, tbl.Act) and type(move.action).__name__ in RATE_LIMITED_ACTIONS


def probe_outcomes(rules: Rules[Any, Any, Any], move: tbl.Input, applied: Applied,
                   received: float, probes: dict[int, float]) -> None:
    """Remember when the action that caused each probed outcome event arrived (``probes``:
    event sequence -> ``perf_counter`` at the action's arrival)."""
    if not is_rate_limited(rules, move):
        return
    for logged in applied.events:
        if type(logged.event.body).__name__ in PROBED_OUTCOMES:
            probes[logged.sequence] = received
