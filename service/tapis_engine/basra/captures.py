"""Capture search: what a played card takes from the floor (RULES.md §4), exactly.

A number card of value v (A = 1, 2..10) takes a *complete* capture: the largest set of floor
number cards that splits into groups each summing to v (a single card of rank v is such a group),
every card used once. Several largest sets may exist; each is an option the player may choose.
The search runs on value counts (suits never matter for sums) and is memoised, then expanded to
the actual floor cards. Q and K take every floor card of their rank; J takes the whole floor;
the 7♦ (Egyptian and Iraqi) sweeps a non-empty floor whose number cards sum to 10 or less.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations, product

from tapis_engine.basra.state import LEBANESE, BasraOptions
from tapis_engine.cards import ACE, JACK, KING, QUEEN, SEVEN, TEN, TWO, Card

SEVEN_OF_DIAMONDS = Card(SEVEN, "D")
TEN_OF_DIAMONDS = Card(TEN, "D")
TWO_OF_CLUBS = Card(TWO, "C")


VALUES = (0, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0, 0, 1, 0)
"""The value in sums of each rank (index = rank): A = 1, 2..10 their rank, faces 0."""


def number_value(card: Card) -> int:
    """The card's value in sums: A = 1, 2..10 their rank, faces 0."""
    return VALUES[card.rank]


def floor_sum(floor: tuple[Card, ...]) -> int:
    """The sum of the floor's number cards (faces count 0)."""
    return sum(VALUES[card.rank] for card in floor)


def _partitions(total: int, largest: int) -> list[tuple[int, ...]]:
    """All ways to write ``total`` as parts ``<= largest``, parts non-increasing."""
    if total == 0:
        return [()]
    out: list[tuple[int, ...]] = []
    for part in range(min(total, largest), 0, -1):
        for rest in _partitions(total - part, part):
            out.append((part, *rest))
    return out


@lru_cache(maxsize=16)
def _groups(value: int) -> tuple[tuple[int, ...], ...]:
    """Every group summing to ``value`` as a count vector indexed by value - 1."""
    out = []
    for parts in _partitions(value, value):
        counts = [0] * value
        for part in parts:
            counts[part - 1] += 1
        out.append(tuple(counts))
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def best_takes(value: int, counts: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The largest complete captures for a card of ``value`` as count vectors.

    ``counts[i]`` is the number of floor cards of value ``i + 1`` (for values up to ``value``).
    Returns every distinct count vector of the largest size, sorted; ``((0,)*value,)`` when
    nothing can be taken.
    """
    groups = [g for g in _groups(value) if all(g[i] <= counts[i] for i in range(value))]
    best_size = 0
    found: set[tuple[int, ...]] = {(0,) * value}

    def search(start: int, remaining: list[int], taken: list[int], size: int) -> None:
        nonlocal best_size, found
        if size > best_size:
            best_size = size
            found = {tuple(taken)}
        elif size == best_size and size:
            found.add(tuple(taken))
        # Bound: even taking every remaining card cannot beat the best.
        if size + sum(remaining) < best_size:
            return
        for index in range(start, len(groups)):
            group = groups[index]
            if all(group[i] <= remaining[i] for i in range(value)):
                gsize = 0
                for i in range(value):
                    remaining[i] -= group[i]
                    taken[i] += group[i]
                    gsize += group[i]
                search(index, remaining, taken, size + gsize)
                for i in range(value):
                    remaining[i] += group[i]
                    taken[i] -= group[i]

    search(0, list(counts), [0] * value, 0)
    return tuple(sorted(found))


@lru_cache(maxsize=1 << 16)
def _plan(value: int, counts: tuple[int, ...]
          ) -> tuple[int, tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """``best_takes`` digested: (0, _, _) nothing to take; (1, take, _) one option using every
    floor card of each value it uses; (2, _, takes) several options to expand card by card."""
    takes = best_takes(value, counts)
    if len(takes) == 1:
        take = takes[0]
        if not any(take):
            return 0, take, takes
        if all(t == 0 or t == c for t, c in zip(take, counts, strict=True)):
            return 1, take, takes
    return 2, takes[0], takes


def _sum_captures(value: int, floor: tuple[Card, ...], counts10: list[int],
                  ten_of_diamonds: int) -> tuple[tuple[Card, ...], ...]:
    kind, take, takes = _plan(value, tuple(counts10[:value]))
    if kind == 0:
        return NOTHING
    sorted_floor = sorted(floor)
    if kind == 1:
        return (tuple(c for c in sorted_floor
                      if 0 < VALUES[c.rank] <= value and take[VALUES[c.rank] - 1]),)
    by_value: list[list[Card]] = [[] for _ in range(value)]
    for card in sorted_floor:
        v = VALUES[card.rank]
        if 0 < v <= value:
            by_value[v - 1].append(card)
    found: set[tuple[Card, ...]] = set()
    for take in takes:
        per_value = [combinations(by_value[i], take[i]) for i in range(value) if take[i]]
        for parts in product(*per_value):
            found.add(tuple(sorted(card for part in parts for card in part)))
    options = sorted(found)
    options.sort(key=lambda cards: -capture_points(cards, ten_of_diamonds))
    return tuple(options)


def _floor_digest(floor: tuple[Card, ...]) -> tuple[list[int], int]:
    """Counts of the floor's number cards by value (index value - 1), and their sum."""
    counts = [0] * 10
    total = 0
    for c in floor:
        v = VALUES[c.rank]
        if v:
            counts[v - 1] += 1
            total += v
    return counts, total


def _options(card: Card, floor: tuple[Card, ...], counts: list[int], total: int,
             seven_sweeps: bool, ten_of_diamonds: int) -> tuple[tuple[Card, ...], ...]:
    rank = card.rank
    if rank == JACK or (seven_sweeps and card == SEVEN_OF_DIAMONDS and floor and total <= 10):
        return (tuple(sorted(floor)),)
    if rank in (QUEEN, KING):
        return (tuple(sorted(c for c in floor if c.rank == rank)),)
    return _sum_captures(VALUES[rank], floor, counts, ten_of_diamonds)


def hand_options(hand: tuple[Card, ...] | list[Card], floor: tuple[Card, ...],
                 seven_sweeps: bool, ten_of_diamonds: int = 3
                 ) -> list[tuple[Card, tuple[tuple[Card, ...], ...]]]:
    """``(card, capture_options(card, ...))`` for each card of ``hand`` (one floor digest)."""
    counts, total = _floor_digest(floor)
    return [(card, _options(card, floor, counts, total, seven_sweeps, ten_of_diamonds))
            for card in hand]


NOTHING: tuple[tuple[Card, ...], ...] = ((),)


def capture_points(cards: tuple[Card, ...], ten_of_diamonds: int) -> int:
    """Points the cards score at the end of the deal (10♦, 2♣, aces, jacks)."""
    points = 0
    for card in cards:
        if card.rank == ACE or card.rank == JACK:
            points += 1
        elif card == TEN_OF_DIAMONDS:
            points += ten_of_diamonds
        elif card == TWO_OF_CLUBS:
            points += 2
    return points


def is_seven_sweep(card: Card, floor: tuple[Card, ...], seven_sweeps: bool) -> bool:
    """Whether ``card`` is the 7♦ sweeping this floor (non-empty, number cards summing <= 10)."""
    return seven_sweeps and card == SEVEN_OF_DIAMONDS and bool(floor) and floor_sum(floor) <= 10


def capture_options(card: Card, floor: tuple[Card, ...], seven_sweeps: bool,
                    ten_of_diamonds: int = 3) -> tuple[tuple[Card, ...], ...]:
    """Every legal capture of ``card`` on ``floor``: sorted card tuples, the default first.

    ``((),)`` when the card takes nothing. Options are ordered by points (most first), then by
    card order: the first is the one the service takes when the action names none.
    """
    counts, total = _floor_digest(floor)
    return _options(card, floor, counts, total, seven_sweeps, ten_of_diamonds)


def takes_all(card: Card, floor: tuple[Card, ...], seven_sweeps: bool) -> bool:
    """Whether ``card`` (not a jack) would take the whole non-empty floor."""
    if not floor or card.rank == JACK:
        return False
    options = capture_options(card, floor, seven_sweeps)
    return len(options[0]) == len(floor)


def basra_how(options: BasraOptions, card: Card, floor: tuple[Card, ...],
              remaining: tuple[Card, ...]) -> str | None:
    """How the capture of ``floor`` by ``card`` (leaving ``remaining``) is a basra, or None.

    Egyptian and Iraqi: a capture by a card other than a jack that empties the floor ("sum",
    "rank" for Q and K, "seven" for the 7♦ sweep); a jack when the floor held exactly one card
    (one or two with ``two_card_jack_basra``). Lebanese: only when the floor held a single card
    of the played card's rank ("match").
    """
    if options.variant == LEBANESE:
        return "match" if len(floor) == 1 and floor[0].rank == card.rank else None
    if card.rank == JACK:
        if len(floor) == 1 or (options.two_card_jack_basra and len(floor) == 2):
            return "jack"
        return None
    if remaining or not floor:
        return None
    if is_seven_sweep(card, floor, True):
        return "seven"
    return "rank" if card.rank in (QUEEN, KING) else "sum"


__all__ = [
    "SEVEN_OF_DIAMONDS",
    "TEN_OF_DIAMONDS",
    "TWO_OF_CLUBS",
    "basra_how",
    "best_takes",
    "capture_options",
    "capture_points",
    "floor_sum",
    "hand_options",
    "is_seven_sweep",
    "number_value",
    "takes_all",
]
