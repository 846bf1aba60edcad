"""Per-game presentation and play for the clients: one module per game, found by the view's
oneof field. Each module offers ``render(view)``, ``describe_action(action)``,
``describe_event(event, seat)`` and ``hotkey(action)``. What bots play is apart, in
tapis_clients.strategies."""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from types import ModuleType

from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card

FIELDS: dict[int, str] = {pb.GAME_KIND_WAR: "war", pb.GAME_KIND_BATAILLE_CORSE: "bataille_corse",
          pb.GAME_KIND_BOUTONS: "boutons", pb.GAME_KIND_BASRA: "basra"}
KINDS: dict[str, pb.GameKind.ValueType] = {
         "war": pb.GAME_KIND_WAR, "bataille-corse": pb.GAME_KIND_BATAILLE_CORSE,
         "corse": pb.GAME_KIND_BATAILLE_CORSE, "boutons": pb.GAME_KIND_BOUTONS,
         "basra": pb.GAME_KIND_BASRA}
_MODULES = {"war": "war", "bataille_corse": "corse", "boutons": "boutons", "basra": "basra"}

RANKS = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9", 10: "10", 11: "J",
         12: "Q", 13: "K", 14: "A", 15: "Joker"}
SUITS = {1: "♣", 2: "♦", 3: "♥", 4: "♠", 0: ""}
RED = {2, 3}


def card_text(card: Card) -> str:
    """``10♥``, ``Q♠``, ``Joker``."""
    return RANKS.get(card.rank, "?") + SUITS.get(card.suit, "")


def card_markup(card: Card) -> str:
    """The card as rich markup, red suits in red."""
    text = card_text(card)
    colour = "red" if card.suit in RED else ("magenta" if card.rank == 15 else "bold")
    return f"[{colour}]{text}[/]"


def module_for(kind: int) -> ModuleType:
    """The presentation module of a game kind."""
    return importlib.import_module(f"tapis_clients.games.{_MODULES[FIELDS[kind]]}")


def describe_action(kind: int, action: pb.Action) -> str:
    which = action.WhichOneof("action")
    if which == "reclaim_seat":
        return "take your seat back from the bot"
    if which == "start_next_game":
        return "start the next game of the series"
    text: str = module_for(kind).describe_action(action)
    return text


def verdict(winners: Sequence[int], seat: int | None, names: Sequence[str] = ()) -> str:
    """Who won, said to the reader: "you win" / "you lose" / "you share the win" / "draw" for
    a seat; a spectator reads names when known, else seat numbers."""
    if not winners:
        return "draw"
    if seat is not None:
        if seat not in winners:
            return "you lose"
        return "you win" if len(winners) == 1 else "you share the win"
    who = " and ".join(names[s] if s < len(names) and names[s] else f"seat {s}"
                       for s in winners)
    return f"{who} {'wins' if len(winners) == 1 else 'share the win'}"


_WHO_WON = re.compile(r"^seat \d+(?:(?:, | and )seat \d+)* (?:wins|win|share the win)\b")
"""The start of a game's summary that names its winners by seat (the server's wording)."""


def summary_for(summary: str, winners: Sequence[int], seat: int | None) -> str:
    """A game's summary with its winners said to a seated reader ("you win: ...")."""
    if seat is None:
        return summary
    return _WHO_WON.sub(verdict(winners, seat), summary, count=1)


def key_hint(kind: int, view: pb.GameView, typed: str) -> str | None:
    """Why a typed key is no move now, when the game can tell (else None)."""
    hint = getattr(module_for(kind), "key_hint", None)
    return None if hint is None else hint(view, typed)


def describe_event(kind: int, event: pb.Event, seat: int | None) -> str | None:
    """One line for a person, or None for events not worth a line."""
    which = event.WhichOneof("body")
    if which == "seat_claimed":
        claimed = event.seat_claimed
        if seat is not None and claimed.seat == seat:
            return f"you sit at seat {claimed.seat}"
        return f"{claimed.display_name or 'someone'} sits at seat {claimed.seat}"
    if which == "game_started":
        return f"game {event.game_started.game_number} starts"
    if which == "seat_taken_over":
        taken = event.seat_taken_over
        tail = " until its player takes it back" if taken.until_reclaimed else " for one move"
        return f"seat {taken.seat}'s time ran out: a bot plays it{tail}"
    if which == "seat_reclaimed":
        return f"seat {event.seat_reclaimed.seat} is back in human hands"
    if which == "game_ended":
        ended = event.game_ended
        board = ", ".join(f"seat {i}: {w}" for i, w in enumerate(ended.scoreboard.wins))
        summary = summary_for(ended.summary, list(ended.winners), seat)
        return (f"game {ended.game_number} over — {summary}. Series: {board}, "
                f"draws: {ended.scoreboard.draws}")
    text: str | None = module_for(kind).describe_event(event, seat)
    return text
