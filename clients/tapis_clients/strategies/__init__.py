"""Bot strategies: what to play, apart from how a table is drawn.

A strategy is a plain function ``(view, legal_actions) -> action`` (or None to pass): ``view`` is
the seat's ``tapis.v1.GameView`` and ``legal_actions`` the moves it may send now, straight from
the server (in a real-time game, from the bot's own following of the event stream). Plug your
own into `tapis-bot play --strategy package.module:function`. Each game's reference policy is
its ``ClientGame.strategy`` (tapis_clients.games).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Sequence

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.game import Strategy

__all__ = ["Strategy", "load", "random_legal", "reference"]


def random_legal(rng: random.Random) -> Strategy:
    """Any legal action, drawn with ``rng`` (never "start the next game")."""

    def pick(view: pb.GameView, legal: Sequence[pb.Action]) -> pb.Action | None:
        moves = [a for a in legal if a.WhichOneof("action") != "start_next_game"]
        return rng.choice(moves) if moves else None

    return pick


def reference(kind: int, rng: random.Random) -> Strategy:
    """The reference bot's policy for ``kind`` (its game's ``strategy``)."""
    from tapis_clients import games

    return games.by_kind(kind).strategy(rng)


def load(spec: str) -> Strategy:
    """The function named ``module:function`` (e.g. ``examples.first_move:choose``); ValueError,
    in words, for a spec that names none (a module that does not import included)."""
    module_name, sep, function_name = spec.partition(":")
    if not sep or not module_name or not function_name:
        raise ValueError(f"a strategy is module:function, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name}: {error}") from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {function_name!r}")
    strategy: Strategy = function
    return strategy
