"""Provable fairness: a commitment to each game's seed, published at its start and revealed at
its end, so every player can check that the deal was fixed before play.

``commitment(seed, salt)`` is the lowercase hex SHA-256 of the UTF-8 text ``"<seed>:<salt>"``
(the seed in decimal). The table's secret salt comes from the service (an input, like the
seed); each game of a series has its own salt derived one way from it, so revealing one game's
salt tells nothing about the next game's.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tapis_engine import rng
from tapis_engine.protocol import GameSetup


def commitment(seed: int, salt: str) -> str:
    """The published commitment to ``seed`` under ``salt``."""
    return hashlib.sha256(f"{seed}:{salt}".encode()).hexdigest()


def verify(seed: int, salt: str, published: str) -> bool:
    """True when the revealed ``seed`` and ``salt`` hash to the ``published`` commitment."""
    return commitment(seed, salt) == published.lower()


def game_salt(table_salt: str, number: int) -> str:
    """The salt of game ``number`` of a series (revealed when that game ends)."""
    return hashlib.sha256(f"{table_salt}:{number}".encode()).hexdigest()[:32]


def game_seed(setup: GameSetup[Any], number: int) -> int:
    """The seed of game ``number`` of the series, derived one way from the table's seed."""
    return rng.derive(setup.seed, number)


def seed_salt(setup: GameSetup[Any], number: int) -> str:
    """The salt of game ``number``'s seed commitment (secret until that game is over)."""
    return game_salt(setup.salt, number)


def seed_commitment(setup: GameSetup[Any], number: int) -> str:
    """The commitment to game ``number``'s seed, published when it starts: what determines
    its deal is its own seed ``game_seed`` (with the stacked deck, if any)."""
    return commitment(game_seed(setup, number), seed_salt(setup, number))
