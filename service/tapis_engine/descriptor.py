"""What the layers above the rules need to know about one game, declared in the game's own files.

Each game module defines one ``GameDescriptor`` (its ``GAME``); ``tapis_engine.registry`` lists
them. Generic code (size limits, the slap limit, metrics, the conformance suite, the bench) reads
a game's facts from here, never from a table keyed by its kind or by its classes' names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tapis_engine.cards import Card
from tapis_engine.protocol import Rules


@dataclass(frozen=True, slots=True)
class GameDescriptor:
    """One game, as every layer above its rules sees it."""

    rules: Rules[Any, Any, Any]
    title: str
    """The game's name as RULES.md gives it (``"Bataille"``)."""
    max_stacked_cards: int
    """The longest stacked deck a creator may choose: the deck times its deals (or rounds)."""
    short_options: Any
    """Options that keep a game short (tests and benchmarks play many of them)."""
    rate_limited_actions: frozenset[type] = frozenset()
    """Real-time actions (any seat, any time) limited per seat: hammering them is no strategy."""
    probed_events: frozenset[type] = frozenset()
    """Events whose delay from the rate-limited action that caused them is measured."""
    private_cards: Callable[[Any, int], Iterable[Card]] | None = None
    """The cards a seat sees that nobody else may (its hand), or None when no card is private
    to anyone (hidden cards are then hidden from everyone)."""
    routine_action: Any | None = None
    """An action the awaited seat can always make (War's reveal, a flip), or None when an
    awaited seat has a real choice to make."""
    variants: tuple[tuple[str, Any], ...] = ()
    """Named options whose rules differ from ``short_options``' (a variant's scoring or
    captures, not just a longer game): each has its own golden playthrough
    (``tools/playthroughs.py``), as ``short_options`` has."""

    @property
    def kind(self) -> str:
        """The game's stable identifier (``Rules.kind``)."""
        return self.rules.kind
