"""Real-time actions: the ones limited per seat, and the latency probe of their outcome.

Which engine actions are played against the clock (a slap: hammering the button is never a
strategy, so it is rate limited per seat) and which events are their outcome (the pile won
after a slap, whose delay to the streams is a metric) is each game's own declaration
(``GameDescriptor.rate_limited_actions`` and ``probed_events``); this module applies it.
"""

from __future__ import annotations

import time
from typing import Any

from tapis_engine import table as tbl
from tapis_engine.protocol import Rules
from tapis_engine.registry import BY_KIND
from tapis_service.observe import metrics
from tapis_service.tables.session import Applied

LIMITED: dict[str, frozenset[type]] = {
    kind: game.rate_limited_actions for kind, game in BY_KIND.items()}
"""Game kind -> its actions limited per seat (the table actor's lookup of
``is_rate_limited``, inlined: empty for most games)."""


def is_rate_limited(rules: Rules[Any, Any, Any], move: tbl.Input) -> bool:
    """Whether ``move`` is an action limited per seat."""
    return isinstance(move, tbl.Act) \
        and type(move.action) in BY_KIND[rules.kind].rate_limited_actions


def probe_outcomes(rules: Rules[Any, Any, Any], move: tbl.Input, applied: Applied,
                   received: float, probes: dict[int, float]) -> None:
    """Remember when the action that caused each probed outcome event arrived (``probes``:
    event sequence -> ``perf_counter`` at the action's arrival)."""
    if not is_rate_limited(rules, move):
        return
    probed = BY_KIND[rules.kind].probed_events
    for logged in applied.events:
        if type(logged.event.body) in probed:
            probes[logged.sequence] = received


def observe_sent(probes: dict[int, float], sequence: int) -> None:
    """A probed event is about to be sent for the first time: record its latency."""
    received = probes.pop(sequence, None)
    if received is not None:
        metrics.SLAP_TO_PILE_WON.observe(time.perf_counter() - received)
