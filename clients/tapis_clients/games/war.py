"""Bataille on screen: each player's row (name, deck, points, the "Bataille !" bubble on a tie,
the countdown of the player to act), the trick in play and the last one."""

from __future__ import annotations

import argparse
import random

from rich.console import Group, RenderableType
from rich.table import Table as Grid
from rich.text import Text

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_clients.cards import card_markup
from tapis_clients.game import ClientGame, Memory
from tapis_clients.i18n import N_, NP_, _, labelled, ngettext, then
from tapis_clients.people import Table, as_table
from tapis_clients.strategies import Strategy, random_legal

_END = {war_pb2.WAR_END_REASON_ALL_CARDS: N_("holds all 52 cards"),
        war_pb2.WAR_END_REASON_SHORT_BATAILLE: N_("the other could not lay a bataille"),
        war_pb2.WAR_END_REASON_DRAW: N_("neither could lay a bataille")}


GAME_OVER = N_("game over")
MAX_TARGET = 10_000
"""The most points to win the server takes (1 to this, else INVALID_OPTIONS; 50 by default)."""


def bubble() -> str:
    return "[bold black on yellow] " + _("Bataille !") + " [/]"


def _trick(cards: list[war_pb2.WarLaidCard], table: Table) -> str:
    if not cards:
        return "—"
    by_seat: dict[int, list[str]] = {}
    for laid in cards:
        by_seat.setdefault(laid.seat, []).append(
            card_markup(laid.card) if laid.face_up else "[dim]▩[/]")
    return "   ".join(f"{table.who(seat)} {' '.join(shown)}" for seat, shown in by_seat.items())


def board(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The table: one row per player, then the tricks."""
    table = as_table(reader)
    war = view.war
    rows = Grid.grid(padding=(0, 2))
    for _column in range(5):
        rows.add_column()
    for seat in range(len(war.deck_sizes)):
        acting = war.HasField("to_move") and war.to_move == seat
        name = table.name(seat) + (" " + _("(you)") if seat == table.me else "")
        timer = table.timers.get(seat, "")
        rows.add_row(("[bold]▶ " if acting else "  ") + name + ("[/]" if acting else ""),
                     _("deck {count}").format(count=war.deck_sizes[seat]),
                     _("points {count}").format(count=war.points[seat]),
                     f"[bold reverse] {timer} [/]" if timer and acting else "",
                     bubble() if war.batailles and not war.end_reason else "")
    lines: list[RenderableType] = [
        rows, Text(""),
        Text.from_markup(_("this trick: {cards}").format(cards=_trick(list(war.trick), table))),
        Text.from_markup(_("last trick: {cards}").format(
            cards=_trick(list(war.last_trick), table)) + (
            "  → " + table.who(war.last_trick_winner)
            if war.HasField("last_trick_winner") else "")),
        Text(""),
        Text.from_markup("[dim]" + ngettext(
            "first to {points} point", "first to {points} points", war.target_points).format(
            points=war.target_points) + " · " + table.said(
            war.first_seat, N_("you reveal first"), N_("{name} reveals first")) + "[/]"),
    ]
    if war.end_reason:
        winners = [war.winner] if war.HasField("winner") else []
        lines.append(Text.from_markup("[bold green]" + labelled(
            table.verdict(winners), end_text(war.end_reason, war.target_points)) + "[/]"))
    return Group(*lines)


def render(view: pb.GameView, reader: Table | int | None = None) -> RenderableType:
    """The board under the game's title (for a one-off print)."""
    return Group(Text.from_markup(f"[bold]{GAME.title}[/]"), board(view, reader))


def end_text(reason: war_pb2.WarEndReason.ValueType, target: int) -> str:
    if reason == war_pb2.WAR_END_REASON_TARGET:
        return ngettext("reached {points} point", "reached {points} points", target).format(
            points=target)
    return _(_END.get(reason, GAME_OVER))


def describe_action(action: pb.Action, reader: Table | int | None = None) -> str:
    return _("reveal your top card")


def hotkey(action: pb.Action) -> str | None:
    return "r" if action.WhichOneof("action") == "war" else None


def describe_event(event: pb.Event, reader: Table | int | None = None) -> str | None:
    """One line for a person, or None. Cards revealed get no line (the table shows the trick
    in play); a trick won says who took it."""
    table = as_table(reader)
    war = event.war
    which = war.WhichOneof("event")
    if which == "trick_won":
        won = war.trick_won
        return table.said_n(
            won.seat,
            NP_("you take the trick ({cards} card)", "you take the trick ({cards} cards)"),
            NP_("{name} takes the trick ({cards} card)", "{name} takes the trick ({cards} cards)"),
            won.cards, cards=won.cards)
    if which == "bataille":
        return "[bold yellow]" + _("Bataille !") + "[/]"
    if which == "short_bataille":
        short = war.short_bataille
        if short.HasField("loser"):
            return table.said(short.loser, N_("you cannot lay a bataille and lose"),
                              N_("{name} cannot lay a bataille and loses"))
        return _("neither player can lay a bataille: draw")
    if which == "dealt":
        return then(_("26 cards each"), table.said(
            war.dealt.first_seat, N_("you reveal first"), N_("{name} reveals first")))
    return None


class WarMemory(Memory):
    def see(self, event: pb.Event, table: Table) -> None:
        if event.WhichOneof("body") == "war" and event.war.WhichOneof("event") == "ended":
            ended = event.war.ended
            self.end_reasons[event.game_number] = end_text(ended.reason,
                                                           max(ended.points, default=0))


def strategy(rng: random.Random) -> Strategy:
    return random_legal(rng)


def set_points(request: pb.CreateGameRequest, points: int) -> None:
    request.war.target_points = points


def set_options(request: pb.CreateGameRequest, args: argparse.Namespace) -> None:
    """``--points`` (the target, ``set_points``'s) checked as the server checks it: ValueError
    above ``MAX_TARGET`` (0, not given, is the server's 50)."""
    if args.points > MAX_TARGET:
        raise ValueError(_("Bataille is played to at most {most} points").format(
            most=MAX_TARGET))


def _describe(action: pb.Action, view: pb.GameView, table: Table) -> str:
    return describe_action(action, table)


GAME = ClientGame(
    kind=pb.GAME_KIND_WAR, field="war", commands=("war", "bataille"), title="Bataille",
    min_size=(64, 22), board=board, describe_action=_describe,
    describe_event=describe_event, hotkey=hotkey, strategy=strategy, seats=(2, 2),
    memory=WarMemory, set_points=set_points, set_options=set_options, default_turn_ms=15_000)
