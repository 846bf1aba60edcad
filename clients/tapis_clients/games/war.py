"""Bataille on screen."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_clients.games import card_markup, verdict

_END = {war_pb2.WAR_END_REASON_TARGET: "reached the target",
        war_pb2.WAR_END_REASON_ALL_CARDS: "holds all 52 cards",
        war_pb2.WAR_END_REASON_SHORT_BATAILLE: "opponent could not lay a bataille",
        war_pb2.WAR_END_REASON_DRAW: "draw"}


def _names(view: pb.GameView) -> list[str]:
    return [s.display_name for s in view.seats]


def _trick(cards: list[war_pb2.WarLaidCard]) -> str:
    if not cards:
        return "—"
    return "  ".join(f"s{c.seat}:" + (card_markup(c.card) if c.face_up else "[dim]▩[/]")
                     for c in cards)


def render(view: pb.GameView) -> RenderableType:
    war = view.war
    me = view.your_seat if view.HasField("your_seat") else None
    grid = Table(show_header=True, header_style="bold cyan", title="Bataille")
    grid.add_column("seat")
    grid.add_column("deck", justify="right")
    grid.add_column("points", justify="right")
    for seat in range(len(war.deck_sizes)):
        label = f"{seat}" + (" (you)" if seat == me else "")
        if war.HasField("to_move") and war.to_move == seat:
            label += " ◀"
        grid.add_row(label, str(war.deck_sizes[seat]), str(war.points[seat]))
    lines: list[RenderableType] = [
        grid,
        Text.from_markup(f"target {war.target_points} points · seat {war.first_seat} reveals "
                         f"first"),
        Text.from_markup(f"this trick: {_trick(list(war.trick))}"
                         + (f"  [bold yellow]Bataille ×{war.batailles}![/]"
                            if war.batailles else "")),
        Text.from_markup(f"last trick: {_trick(list(war.last_trick))}" + (
            f" → seat {war.last_trick_winner}" if war.HasField("last_trick_winner") else "")),
    ]
    if war.end_reason:
        who = verdict([war.winner] if war.HasField("winner") else [], me, _names(view))
        lines.append(Text.from_markup(f"[bold green]{who}: {_END[war.end_reason]}[/]"))
    return Group(*lines)


def describe_action(action: pb.Action) -> str:
    return "reveal your top card"


def hotkey(action: pb.Action) -> str | None:
    return "r" if action.WhichOneof("action") == "war" else None


def describe_event(event: pb.Event, seat: int | None) -> str | None:
    """One line for a person, or None. Cards revealed get no line (the table shows the trick
    in play); a trick won says who took it."""
    war = event.war
    which = war.WhichOneof("event")
    if which == "trick_won":
        won = war.trick_won
        who = "you" if won.seat == seat else f"seat {won.seat}"
        return f"{who} took the trick ({won.cards} cards)"
    if which == "bataille":
        return "[bold yellow]Bataille![/]"
    if which == "short_bataille":
        short = war.short_bataille
        if short.HasField("loser"):
            return f"seat {short.loser} cannot lay a bataille and loses"
        return "neither player can lay a bataille: draw"
    if which == "dealt":
        return f"26 cards each; seat {war.dealt.first_seat} reveals first"
    return None
