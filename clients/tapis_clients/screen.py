"""The table on screen for the interactive client: the caller's view, who sits where, the
latest event lines, the move menu and the prompt, redrawn whole at every change."""

from __future__ import annotations

import hashlib
from collections import deque

from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games

EVENT_LINES = 8
"""Event lines kept under the table."""
ONE_COLUMN_MENU = 8
"""Longer menus are laid out in columns, so that they fit a 40-row terminal."""


TITLES: dict[int, str] = {pb.GAME_KIND_WAR: "Bataille",
                          pb.GAME_KIND_BATAILLE_CORSE: "Bataille Corse",
                          pb.GAME_KIND_BOUTONS: "Boutons", pb.GAME_KIND_BASRA: "Basra"}
"""The games' names as the rules and the README say them (GAME_KIND_WAR is Bataille)."""


def kind_title(kind: int) -> str:
    return TITLES.get(kind) or pb.GameKind.Name(kind)[10:].title()  # type: ignore[arg-type]


def seat_names(view: pb.GameView) -> str:
    """``seat 0: ana (you) · seat 1: bot (random) · seat 2: open``."""
    me = view.your_seat if view.HasField("your_seat") else None
    parts = []
    for seat in view.seats:
        if seat.type == pb.SEAT_TYPE_BOT:
            name = f"bot ({seat.bot_strategy})" if seat.bot_strategy else "bot"
        elif not seat.taken:
            name = "[dim]open[/]"
        else:
            name = seat.display_name or "someone"
            if seat.bot_controlled:
                name += " [yellow](a bot plays for now)[/]"
        if seat.seat == me:
            name += " [bold](you)[/]"
        parts.append(f"seat {seat.seat}: {name}")
    return " · ".join(parts)


def waiting_table(view: pb.GameView) -> RenderableType:
    """A table whose players are not all seated yet."""
    taken = sum(1 for seat in view.seats if seat.taken)
    lines: list[RenderableType] = [
        Text.from_markup(f"[bold]waiting for players[/]: {taken} of {len(view.seats)} seats "
                         "taken"),
    ]
    open_seats = [str(seat.seat) for seat in view.seats if not seat.taken]
    if open_seats:
        lines.append(Text.from_markup(
            f"open: seat {', '.join(open_seats)} — join with `tapis join {view.game_id}`"))
    return Group(*lines)


def fair(seed: int, seed_salt: str, seed_commitment: str) -> bool:
    """The revealed seed and salt hash to the commitment published at the game's start."""
    return hashlib.sha256(f"{seed}:{seed_salt}".encode()).hexdigest() == seed_commitment


def fairness_line(view: pb.GameView, committed: str = "") -> str:
    """The deal's commitment while the game is played; once it is over, the check of the
    revealed seed against the commitment seen at its start (``committed``, else the view's)."""
    fairness = view.fairness
    commitment = committed or fairness.seed_commitment
    if not commitment:
        return ""
    chosen = " · [yellow]dealt as the creator chose[/]" if fairness.deal_chosen else ""
    if fairness.seed_salt:
        if fair(fairness.seed, fairness.seed_salt, commitment):
            verdict = "[green]✓ fixed before play[/]"
        else:
            verdict = "[bold red]✗ does not match the commitment[/]"
        return f"deal check: sha256(seed:salt) = {commitment[:12]}… {verdict}{chosen}"
    return f"[dim]deal committed before play: {commitment[:12]}…[/]{chosen}"


def menu(kind: int, actions: list[pb.Action]) -> RenderableType:
    """The moves, numbered from 1, with their hotkeys."""
    module = games.module_for(kind)
    entries = []
    for i, action in enumerate(actions, 1):
        key = module.hotkey(action) if action.WhichOneof("action") == games.FIELDS[kind] \
            else None
        entries.append(f"[bold][{i}{'/' + key if key else ''}][/] "
                       f"{games.describe_action(kind, action)}")
    if len(entries) <= ONE_COLUMN_MENU:
        return Group(*(Text.from_markup(entry) for entry in entries))
    return Columns([Text.from_markup(entry) for entry in entries], column_first=True,
                   equal=True, expand=False)


class Screen:
    """What the person sees; ``draw`` repaints it all."""

    def __init__(self, console: Console, kind: int, seat: int | None) -> None:
        self.console = console
        self.kind = kind
        self.seat = seat
        self.lines: deque[str] = deque(maxlen=EVENT_LINES)
        self.status = ""
        """A line about the connection or the last refusal ("" for none)."""
        self.commitments: dict[int, str] = {}
        """Game number -> the seed commitment its GameStarted event published."""

    def add_event(self, event: pb.Event) -> None:
        if event.WhichOneof("body") == "game_started" and event.game_started.seed_commitment:
            started = event.game_started
            self.commitments[started.game_number] = started.seed_commitment
        line = games.describe_event(self.kind, event, self.seat)
        if line:
            self.lines.append(line)

    def draw(self, view: pb.GameView, actions: list[pb.Action], prompt: str) -> None:
        console = self.console
        if console.is_terminal:
            console.clear()
        title = f"{kind_title(view.kind)} · {view.game_id} · v{view.version}"
        if view.status == pb.GAME_STATUS_WAITING_FOR_PLAYERS:
            body = waiting_table(view)
        else:
            body = games.module_for(self.kind).render(view)
        console.print(Panel(body, title=title))
        console.print(Text.from_markup(seat_names(view)))
        deal = fairness_line(view, self.commitments.get(view.game_number, ""))
        if deal:
            console.print(Text.from_markup(deal))
        board = view.scoreboard
        if board.games_played:
            wins = ", ".join(f"seat {i}: {w}" for i, w in enumerate(board.wins))
            console.print(f"series after {board.games_played} game(s): {wins}, "
                          f"draws: {board.draws}")
        for line in self.lines:
            console.print(Text.from_markup("  " + line))
        if self.status:
            console.print(Text.from_markup(self.status))
        if actions:
            console.print(menu(self.kind, actions))
        console.print(Text.from_markup(prompt), end="")
