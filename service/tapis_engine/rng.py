"""A small, explicit, serializable PRNG (SplitMix64) held in game state.

The state is one 64-bit integer, so it copies for free and snapshots as a number. Every
function returns the drawn value *and* the next state: nothing is global, nothing is hidden.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final, TypeVar

T = TypeVar("T")

MASK64: Final = (1 << 64) - 1
_GAMMA: Final = 0x9E3779B97F4A7C15


def mix64(value: int) -> int:
    """The SplitMix64 finaliser: a well-spread 64-bit hash of ``value``."""
    z = value & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def next_u64(state: int) -> tuple[int, int]:
    """Draw a 64-bit value; return ``(value, next_state)``."""
    state = (state + _GAMMA) & MASK64
    return mix64(state), state


def below(state: int, bound: int) -> tuple[int, int]:
    """Draw an integer uniformly in ``[0, bound)`` (rejection sampling, no modulo bias)."""
    if bound <= 0:
        raise ValueError("bound must be positive")
    limit = MASK64 - (MASK64 + 1) % bound
    while True:
        value, state = next_u64(state)
        if value <= limit:
            return value % bound, state


def shuffled(state: int, items: Sequence[T]) -> tuple[tuple[T, ...], int]:
    """Fisher–Yates shuffle; return ``(shuffled_items, next_state)``."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j, state = below(state, i + 1)
        out[i], out[j] = out[j], out[i]
    return tuple(out), state


def choice(state: int, items: Sequence[T]) -> tuple[T, int]:
    """Pick one item uniformly; return ``(item, next_state)``."""
    index, state = below(state, len(items))
    return items[index], state


def derive(seed: int, *salt: int) -> int:
    """A new independent seed from ``seed`` and integers (a game number, a seat, a step).

    One-way (BLAKE2b): a derived seed shown to players (a finished game's seed) reveals
    neither the table's seed nor any other game's.
    """
    data = b"".join((part & MASK64).to_bytes(8, "little") for part in (seed, *salt))
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
