"""The full-screen client (Textual): one table on screen, played or watched.

The screen has a fixed layout per game: the title row, the game's board, a caption, the series
scoreboard, the move menu, an event log in a panel of its own, a status line and the keys.
Below the game's smallest size it asks for a larger terminal; a resize redraws; the terminal is
given back as it was on any exit (Textual's alternate screen).

Keys are read only while a move can apply, and keys typed before the menu on screen was drawn
are thrown away; a move is sent with the table version it was chosen on (slaps excepted), so a
table that moved meanwhile refuses it instead of taking it blindly. The event stream resumes by
sequence after a server restart. q leaves (status 0), Ctrl-C too (status 130), and so does a
SIGTERM (status 143: a ``kill``, the terminal given back all the same); a seat its backend gives
to someone else (ReplaceSeat) ends the screen, saying so (status 1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from typing import Any

import grpc
from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual._time import get_time  # the clock Textual stamps key events with
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import RichLog, Static

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games, lines, refusals
from tapis_clients.connection import Connection, error_reason, in_doubt
from tapis_clients.game import ClientGame
from tapis_clients.i18n import _, ngettext
from tapis_clients.people import Table

LOG_LINES = 400
"""Event lines kept in the log panel (it scrolls)."""
MENU_COLUMNS_FROM = 5
"""Menus longer than this are laid out in columns."""


def countdown(ms: int) -> str:
    """``m:ss`` (rounded up: 0:00 only when the time is out)."""
    seconds = max(0, -(-ms // 1000))
    return f"{seconds // 60}:{seconds % 60:02d}"


def resolve_keys(game: ClientGame, actions: list[pb.Action], typed: str,
                 enter: bool) -> tuple[pb.Action | None, bool]:
    """The move that ``typed`` names (a number from 1, or the move's key), and whether more
    keys could still name one. A name that is also the start of a longer one (``1`` and
    ``12``) waits for Enter; Enter alone is the first move."""
    if not actions:
        return None, False
    if enter and not typed:
        return actions[0], False
    names: list[tuple[str, pb.Action]] = []
    for i, action in enumerate(actions, 1):
        names.append((str(i), action))
        key = lines.hotkey(game, action)
        if key:
            names.append((key, action))
    exact = [action for name, action in names if name == typed]
    longer = any(name.startswith(typed) and name != typed for name, _action in names)
    if exact and (enter or not longer):
        return exact[0], False
    return None, longer and not enter


def menu(game: ClientGame, view: pb.GameView, actions: list[pb.Action],
         table: Table) -> RenderableType:
    """The moves: the game's own menu if it has one, else numbered from 1 with their keys."""
    own = game.menu(view, actions, table)
    entries = []
    for i, action in enumerate(actions, 1):
        if own is not None and action.WhichOneof("action") == game.field:
            continue  # in the game's own menu
        key = lines.hotkey(game, action)
        label = f"{i}" + (f"/{key}" if key else "")
        entries.append(f"[bold reverse] {label} [/] "
                       f"{lines.describe_action(game, action, view, table)}")
    shown: list[RenderableType] = []
    if own is not None:
        shown.append(own)
    if len(entries) > MENU_COLUMNS_FROM:
        shown.append(Columns([Text.from_markup(e) for e in entries], column_first=True,
                             padding=(0, 2)))
    else:
        shown.extend(Text.from_markup(entry) for entry in entries)
    return Group(*shown)


class EndWindow(ModalScreen[bool]):
    """The end of a game: every game of the series so far, the latest highlighted; Enter
    starts the next one (when the reader may), Escape closes."""

    BINDINGS = [Binding("enter", "next", show=False), Binding("escape", "close", show=False)]
    DEFAULT_CSS = """
    EndWindow { align: center middle; }
    #end { width: 76; height: auto; max-height: 20; border: double $accent;
           background: $panel; padding: 0 1; }
    """

    def __init__(self, heading: str, rows: list[tuple[int, str]], latest: int,
                 footer: str) -> None:
        super().__init__()
        self.heading = heading
        self.rows = rows
        self.latest = latest
        self.footer = footer

    def compose(self) -> ComposeResult:
        shown: list[RenderableType] = [Text.from_markup(f"[bold]{self.heading}[/]"), Text("")]
        for number, row in self.rows[-14:]:
            style = "bold reverse" if number == self.latest else ""
            shown.append(Text.from_markup(f"[{style}] {row} [/]" if style else f" {row}"))
        shown.extend([Text(""), Text.from_markup(f"[dim]{self.footer}[/]")])
        yield Static(Group(*shown), id="end")

    def action_next(self) -> None:
        self.dismiss(True)

    def action_close(self) -> None:
        self.dismiss(False)


class NoteWindow(ModalScreen[bool]):
    """Something to read before going on (a deal's score sheet, the deal check)."""

    BINDINGS = [Binding("enter", "close", show=False), Binding("escape", "close", show=False)]
    DEFAULT_CSS = """
    NoteWindow { align: center middle; }
    #note { width: auto; max-width: 78; height: auto; border: round $accent;
            background: $panel; padding: 0 1; }
    """

    def __init__(self, body: RenderableType) -> None:
        super().__init__()
        self.body = body

    def compose(self) -> ComposeResult:
        yield Static(Group(self.body, Text(""), Text.from_markup(
            "[dim]" + _("Enter: go on") + "[/]")), id="note")

    def action_close(self) -> None:
        self.dismiss(True)


class TableApp(App[int]):
    """One table on screen: ``seat`` and ``token`` to play it, None to watch."""

    CSS = """
    Screen { layout: vertical; }
    #main { height: 1fr; }
    #title { height: 1; background: $primary; color: $text; text-style: bold; }
    #banner { height: auto; background: $warning; color: black; display: none; }
    #board { height: auto; padding: 0 1; }
    #caption { height: 1; padding: 0 1; }
    #series { height: auto; padding: 0 1; color: $text-muted; }
    #menu { height: auto; max-height: 8; padding: 0 1; }
    #log { height: 1fr; min-height: 3; border: round $surface-lighten-2;
           border-title-color: $text-muted; scrollbar-size: 1 1; }
    #status { height: 1; padding: 0 1; }
    #keys { height: 1; padding: 0 1; color: $text-muted; }
    #small { display: none; height: 1fr; content-align: center middle; text-style: bold; }
    """
    BINDINGS = [Binding("ctrl+c", "leave(130)", show=False, priority=True)]
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, conn: Connection, view: pb.GameView, seat: int | None,
                 token: str | None) -> None:
        super().__init__()
        self.conn = conn
        self.view = view
        self.game_id = view.game_id
        self.game = games.by_kind(view.kind)
        self.seat = seat
        self.token = token
        self.memory = self.game.memory()
        self.table = Table.of(view)
        self.actions: list[pb.Action] = []
        self.drawn_version = -1
        self.move_failed = False
        """The move sent (which spent the menu) failed: the menu comes back on the next
        refresh, whether the table moved or not."""
        self.menu_at = 0.0
        self.typed = ""
        self.status = ""
        self.changed = asyncio.Event()
        self.first_sequence = view.last_sequence
        """Events up to here were history when the screen opened: no window for them."""
        self.skew_ms = 0
        """The server's clock minus ours, from the latest event's time (for countdowns)."""
        self.commitments: dict[int, str] = {}
        self.ended_shown = view.game_number if view.status == pb.GAME_STATUS_GAME_OVER else 0
        self.notes: list[RenderableType] = []
        self.modal_open = False

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="main"):
            yield Static(id="title")
            yield Static(id="banner")
            yield Static(id="board")
            yield Static(id="caption")
            yield Static(id="series")
            yield Static(id="menu")
            yield RichLog(id="log", max_lines=LOG_LINES, markup=True, wrap=True)
            yield Static(id="status")
            yield Static(id="keys")
        yield Static(id="small")

    def on_mount(self) -> None:
        log = self.query_one("#log", RichLog)
        log.border_title = _("events")
        self.conn.on_retry = self._lost
        self.run_worker(self._follow(), exit_on_error=True)
        self.run_worker(self._refresh_loop(), exit_on_error=True)
        self.set_interval(0.25, self._tick)
        self._fit()
        self.changed.set()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, columns: int | None = None, rows: int | None = None) -> None:
        """The table when it fits, else the notice asking for a larger terminal."""
        columns = self.size.width if columns is None else columns
        rows = self.size.height if rows is None else rows
        with contextlib.suppress(Exception):
            width, height = self.game.min_size
            small = columns < width or rows < height
            self.query_one("#main").display = not small
            notice = self.query_one("#small", Static)
            notice.display = small
            notice.update(_("Enlarge the terminal to at least {width}×{height} "
                            "(now {now_width}×{now_height})").format(
                width=width, height=height, now_width=columns, now_height=rows))
            self.refresh(layout=True)

    # --- drawing --------------------------------------------------------------------------

    def redraw(self) -> None:
        view, table = self.view, self.table
        title = f" {self.game.title}"
        if view.game_number:
            title += " · " + _("game {number}").format(number=view.game_number)
        if self.seat is None:
            title += " · " + _("watching")
        self.query_one("#title", Static).update(Text.from_markup(title))
        banner = self.query_one("#banner", Static)
        mine = [s for s in view.seats if s.seat == self.seat and s.bot_controlled]
        banner.display = bool(mine)
        if mine:
            banner.update(Text.from_markup(" " + _(
                "Your time ran out: a bot plays your seat. Press [bold]t[/] to take it back.")))
        board = self.query_one("#board", Static)
        if view.status == pb.GAME_STATUS_WAITING_FOR_PLAYERS:
            board.update(self._waiting())
        else:
            board.update(self.game.board(view, table))
        self.query_one("#caption", Static).update(Text.from_markup(
            self.memory.caption(table) or ""))
        self.query_one("#series", Static).update(Text.from_markup(
            lines.series_line(self.game, view, table)))
        self.query_one("#menu", Static).update(
            menu(self.game, view, self.actions, table) if self.actions else Text(""))
        self.query_one("#status", Static).update(Text.from_markup(self.status or ""))
        self.query_one("#keys", Static).update(Text.from_markup(self._keys_line()))

    def _waiting(self) -> RenderableType:
        taken = sum(1 for seat in self.view.seats if seat.taken)
        return Group(Text.from_markup("[bold]" + ngettext(
            "waiting for players: {taken} of {seats} seats taken",
            "waiting for players: {taken} of {seats} seats taken", taken).format(
            taken=taken, seats=len(self.view.seats)) + "[/]"),
            Text(_("others join with: tapis join {game_id}").format(game_id=self.game_id)))

    def _keys_line(self) -> str:
        parts = []
        if self.actions:
            parts.append(_("keys or numbers play · Enter = 1"))
            if self.typed:
                parts.append(_("typed: {keys}").format(keys=self.typed))
        elif self.view.status == pb.GAME_STATUS_IN_PROGRESS and self.view.awaiting_seats:
            awaited = list(self.view.awaiting_seats)
            parts.append(_("waiting for you") if awaited == [self.seat] else  # "on vous attend"
                         _("waiting for {names}").format(names=self.table.listed(awaited)))
        parts.append(_("{key} deal check").format(key=self.fairness_key()))
        parts.append(_("q quit"))
        return " · ".join(parts)

    def fairness_key(self) -> str:
        """``f``, unless the game plays on f (flips): then ``F``."""
        return "F" if "f" in self.game.reserved_keys else "f"

    def _tick(self) -> None:
        """The countdown of the player to act, once a quarter of a second."""
        now = int(time.time() * 1000) + self.skew_ms
        limit = self.view.settings.turn_time_limit_ms
        timers = {}
        for deadline in self.view.deadlines:
            left = deadline.expire_time.ToMilliseconds() - now
            timers[deadline.seat] = countdown(min(left, limit) if limit else left)
        if timers != self.table.timers:
            self.table.timers = timers
            if self.view.status != pb.GAME_STATUS_WAITING_FOR_PLAYERS:
                self.query_one("#board", Static).update(self.game.board(self.view, self.table))

    # --- the table ------------------------------------------------------------------------

    async def _fetch(self) -> pb.GameView:
        return (await self.conn.call(self.conn.stub.GetGame,
                                     pb.GetGameRequest(game_id=self.game_id), self.token)).game

    def _lost(self, error: grpc.RpcError) -> None:
        self.status = self._reconnecting()
        with contextlib.suppress(Exception):
            self.query_one("#status", Static).update(Text.from_markup(self.status))

    @staticmethod
    def _reconnecting() -> str:
        """The status line while a call is retried (a refresh that got through clears it)."""
        return "[yellow]" + _("connection lost: reconnecting…") + "[/]"

    async def _follow(self) -> None:
        """Every event of the table from its first (the log, the reasons games ended)."""
        log = self.query_one("#log", RichLog)
        try:
            async for event in self.conn.events(
                    self.game_id, 0, self.token,
                    on_presence=lambda change: self._presence(change, log)):
                self._note(event, log)
        except grpc.aio.AioRpcError as error:
            self._leave(error)
            return
        self.exit(return_code=0)

    def _note(self, event: pb.Event, log: RichLog) -> None:
        if event.WhichOneof("body") == "seat_claimed":
            self.table = Table.of(self.view)
        if event.WhichOneof("body") == "game_started" and event.game_started.seed_commitment:
            self.commitments[event.game_started.game_number] = \
                event.game_started.seed_commitment
        self.memory.see(event, self.table)
        paused = self.memory.take_pause()
        if paused is not None and event.sequence > self.first_sequence:
            self.notes.append(paused)
        line = lines.describe_event(self.game, event, self.table)
        if line:
            log.write(Text.from_markup(line))
        if event.HasField("time"):
            self.skew_ms = event.time.ToMilliseconds() - int(time.time() * 1000)
        self.changed.set()

    def _presence(self, change: pb.PresenceChanged, log: RichLog) -> None:
        """A seat's person went away or came back (their app's stream)."""
        if change.seat == self.seat:
            return
        name = self.table.name(change.seat)
        line = (_("{name} is back") if change.connected
                else _("{name} went away")).format(name=name)
        log.write(Text(line, style="dim"))
        self.changed.set()

    def _leave(self, error: grpc.aio.AioRpcError) -> None:
        """The table's stream or view refused for good (the connection retried what it may):
        the seat given to someone else, the table gone, or gone back to an earlier copy of
        itself (a restore). Said in a sentence, and the screen ends with status 1, not a
        traceback."""
        self.exit(return_code=1, message=refusals.explain(error))

    async def _refresh_loop(self) -> None:
        while True:
            await self.changed.wait()
            self.changed.clear()
            try:
                view = await self._fetch()
            except grpc.aio.AioRpcError as error:
                self._leave(error)
                return
            if self.status == self._reconnecting():
                self.status = ""
            self.view = view
            table = Table.of(view)
            table.timers = self.table.timers
            self.table = table
            if view.version != self.drawn_version or self.move_failed:
                self.move_failed = False
                self.actions = list(view.legal_actions) if self.seat is not None else []
                self.typed = ""
                self.drawn_version = view.version
                self.menu_at = get_time()
                self._discard_typed_ahead()
            self.redraw()
            self._windows()

    def _discard_typed_ahead(self) -> None:
        """Keys still in the terminal's input buffer were typed for an older screen."""
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError):  # no real input (a headless run, a test)
            return
        if os.isatty(fd):
            import termios

            with contextlib.suppress(termios.error):
                termios.tcflush(fd, termios.TCIFLUSH)

    def _windows(self) -> None:
        """A window to read before going on: a deal's scores, the end of a game."""
        if self.modal_open:
            return
        if self.notes:
            self.modal_open = True
            self.push_screen(NoteWindow(self.notes.pop(0)), self._window_closed)
            return
        view = self.view
        if view.status == pb.GAME_STATUS_GAME_OVER and self.ended_shown != view.game_number:
            self.ended_shown = view.game_number
            self.modal_open = True
            rows = lines.series_rows(self.game, view, self.table, self.memory.end_reasons)
            can_go_on = any(a.WhichOneof("action") == "start_next_game" for a in self.actions)
            footer = _("Enter: next game · Esc: close · q: quit") if can_go_on else \
                _("Enter: close · q: quit")
            latest = view.series[-1].game_number if view.series else view.game_number
            heading = _("Game {number} is over: {verdict}").format(
                number=latest, verdict=self.table.verdict(
                    list(view.series[-1].winners) if view.series else []))
            self.push_screen(EndWindow(heading, rows, latest, footer), self._end_closed)

    def _window_closed(self, result: bool | None) -> None:
        self.modal_open = False
        self._windows()

    def _end_closed(self, result: bool | None) -> None:
        self.modal_open = False
        start = [a for a in self.actions if a.WhichOneof("action") == "start_next_game"]
        if result and start:
            self.run_worker(self._submit(start[0], self.drawn_version))
        self._windows()

    # --- keys -----------------------------------------------------------------------------

    def action_leave(self, status: int) -> None:
        self.exit(return_code=status)

    def on_key(self, event: events.Key) -> None:
        if self.modal_open and event.key != "q":
            return
        key = event.character or ""
        if event.key == "q" or key == "q":
            event.stop()
            self.exit(return_code=0)
            return
        if key == self.fairness_key() and not self.modal_open:
            event.stop()
            self.modal_open = True
            self.push_screen(NoteWindow(Group(*(Text.from_markup(line) for line in
                                                lines.fairness_lines(
                                                    self.view, self.commitments.get(
                                                        self.view.game_number, ""))))),
                             self._window_closed)
            return
        if not self.actions or event.time < self.menu_at:
            return  # nothing to play, or typed for an older screen: thrown away
        event.stop()
        if event.key == "backspace":
            self.typed = self.typed[:-1]
            self.redraw()
            return
        enter = event.key == "enter"
        if not enter:
            if not key or not key.isprintable():
                return
            self.typed += key.lower()
        picked, more = resolve_keys(self.game, self.actions, self.typed, enter)
        if picked is None:
            if not more:
                hint = self.game.key_hint(self.view, self.typed, self.table)
                self.status = "[red]" + (hint or _("no such move: {keys}").format(
                    keys=self.typed or "Enter")) + "[/]"
                self.typed = ""
            self.redraw()
            return
        self.typed = ""
        if not self.game.realtime(picked):
            self.actions = []  # one move per table version
        self.run_worker(self._submit(picked, self.drawn_version))

    async def _submit(self, action: pb.Action, chosen_on: int) -> None:
        """Play a move; a refusal is said in a sentence on the status line, and the menu
        comes back (the table may not have moved: nothing else would draw it again).
        ``chosen_on``: the version of the menu it was chosen from (the screen may have read a
        later one since), which the move expects unless it is a real-time one (a slap)."""
        request = pb.SubmitActionRequest(game_id=self.game_id, action=action,
                                         request_id=uuid.uuid4().hex)
        if not self.game.realtime(action):
            request.expected_version = chosen_on
        try:
            await self.conn.call(self.conn.stub.SubmitAction, request, self.token or "")
            self.status = ""
        except grpc.aio.AioRpcError as error:
            reason = error_reason(error)
            said = self.memory.refusal(reason, self.table) or refusals.explain(error, move=True)
            look_again = reason == "STALE_VERSION" or in_doubt(error)
            self.status = ("[yellow]" if look_again else "[red]") + said + "[/]"
            self.move_failed = True
        self.changed.set()


LEAVING_SIGNAL = signal.SIGTERM
"""A ``kill``: it leaves the table screen as Ctrl-C does (the terminal given back as it was),
with the shell's status for it (128 + its number)."""


async def show(conn: Connection, game_id: str, seat: int | None, token: str | None,
               **options: Any) -> int:
    """Open the table full screen until the person leaves; the exit status."""
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id), token)).game
    app = TableApp(conn, view, seat, token)
    loop = asyncio.get_running_loop()
    handled = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not main thread
        loop.add_signal_handler(LEAVING_SIGNAL, app.action_leave, 128 + LEAVING_SIGNAL)
        handled = True
    try:
        await app.run_async(**options)
    finally:
        conn.on_retry = None
        if handled:
            loop.remove_signal_handler(LEAVING_SIGNAL)
    return app.return_code or 0
