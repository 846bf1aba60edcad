"""`tapis`: play and watch Tapis games in a terminal.

    tapis play war                      play Bataille against the computer
    tapis play basra --players 4        you and three computer players
    tapis create war --people 2         a table for two people (prints its id)
    tapis join GAME_ID                  take a free seat (or the one you left) and play
    tapis watch GAME_ID                 follow a table as a spectator, game after game
    tapis list [--json]                 the tables on the server

--target HOST:PORT (before or after the subcommand; or TAPIS_TARGET, or TAPIS_PORT) names the
server. While playing: the keys or numbers of the menu act at once (Enter = the first move);
q or Ctrl-C quit at any moment, and `tapis join GAME_ID` takes your seat back later.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import os
import sys
import uuid
from collections.abc import Coroutine
from typing import Any

import grpc
from google.protobuf import json_format
from rich.console import Console
from rich.table import Table

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games, seats_file
from tapis_clients.connection import Connection, Credentials, Unreachable, error_reason
from tapis_clients.keys import KeyReader
from tapis_clients.options import add_target, global_parent
from tapis_clients.screen import Screen

console = Console()
ENTER = ("\r", "\n")
BACKSPACE = ("\x7f", "\b")


def resolve_keys(kind: int, actions: list[pb.Action], typed: str,
                 enter: bool) -> tuple[pb.Action | None, bool]:
    """The move that ``typed`` names (a number from 1, or the move's hotkey), and whether more
    keys could still name one. A name that is also the start of a longer one (``1`` and
    ``12``) waits for Enter; Enter alone is the first move."""
    if not actions:
        return None, False
    if enter and not typed:
        return actions[0], False
    module = games.module_for(kind)
    names: list[tuple[str, pb.Action]] = []
    for i, action in enumerate(actions, 1):
        names.append((str(i), action))
        if action.WhichOneof("action") == games.FIELDS[kind]:
            key = module.hotkey(action)
            if key:
                names.append((key, action))
    exact = [action for name, action in names if name == typed]
    longer = any(name.startswith(typed) and name != typed for name, _ in names)
    if exact and (enter or not longer):
        return exact[0], False
    return None, longer and not enter


def prompt_for(view: pb.GameView, actions: list[pb.Action], typed: str) -> str:
    if actions:
        return f"your move (number or key, Enter = 1, q quits) › {typed}"
    if view.status == pb.GAME_STATUS_WAITING_FOR_PLAYERS:
        return "[dim]waiting for the other players to sit… (q quits)[/]"
    if view.status == pb.GAME_STATUS_IN_PROGRESS and view.awaiting_seats:
        seats = ", ".join(str(s) for s in view.awaiting_seats)
        return f"[dim]waiting for seat {seats}… (q quits)[/]"
    if view.status == pb.GAME_STATUS_GAME_OVER:
        return "[dim]game over (q quits)[/]"
    return "[dim](q quits)[/]"


def is_slap(action: pb.Action) -> bool:
    return action.WhichOneof("action") == "bataille_corse" and \
        action.bataille_corse.WhichOneof("action") == "slap"


async def session(conn: Connection, game_id: str, seat: int | None, token: str | None,
                  keys: KeyReader) -> None:
    """Show a table and, for a seat, play it: the screen redraws at every event; keys typed
    before the move list on screen was drawn are thrown away; a move is sent with the version
    it was chosen on, so a table that moved meanwhile refuses it instead of taking it blindly.
    Runs until cancelled (the person quits)."""

    async def fetch() -> pb.GameView:
        return (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                token)).game

    view = await fetch()
    screen = Screen(console, view.kind, seat)
    changed = asyncio.Event()
    typed = ""
    actions: list[pb.Action] = []
    drawn_version = -1

    def redraw() -> None:
        screen.draw(view, actions, prompt_for(view, actions, typed))

    def lost(error: grpc.RpcError) -> None:
        screen.status = f"[yellow]connection lost ({error.code().name}): reconnecting…[/]"
        redraw()

    conn.on_retry = lost

    async def follow() -> None:
        start = max(0, view.last_sequence - 2 * screen.lines.maxlen)  # type: ignore[operator]
        async for event in conn.events(game_id, start, token):
            screen.add_event(event)
            changed.set()

    follower = asyncio.ensure_future(follow())
    changed.set()
    try:
        while True:
            if changed.is_set():
                changed.clear()
                view = await fetch()
                if screen.status.startswith("[yellow]connection lost"):
                    screen.status = ""
                if view.version != drawn_version:
                    actions = list(view.legal_actions)
                    keys.discard_typed_ahead()
                    typed = ""
                    drawn_version = view.version
                redraw()
            key_task = asyncio.ensure_future(keys.keys.get())
            change_task = asyncio.ensure_future(changed.wait())
            done, _ = await asyncio.wait({key_task, change_task, follower},
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in (key_task, change_task):
                if task not in done:
                    task.cancel()
            if follower in done:
                await follower  # a stream that ended for good: raise why
                return
            if key_task not in done or not actions:
                continue  # a key while there is nothing to play is thrown away
            key = key_task.result()
            if key in BACKSPACE:
                typed = typed[:-1]
                redraw()
                continue
            enter = key in ENTER
            if not enter:
                typed += key.lower()
            picked, more = resolve_keys(view.kind, actions, typed, enter)
            if picked is None:
                if not more:
                    hint = games.key_hint(view.kind, view, typed) \
                        or f"no such move: {typed or 'Enter'}"
                    screen.status = f"[red]{hint}[/]"
                    typed = ""
                redraw()
                continue
            typed = ""
            screen.status = await submit(conn, game_id, picked, token or "",
                                         None if is_slap(picked) else view.version)
            changed.set()
    finally:
        conn.on_retry = None
        follower.cancel()


async def submit(conn: Connection, game_id: str, action: pb.Action, token: str,
                 expected_version: int | None) -> str:
    """Play a move; the status line to show (a refusal and its reason, or nothing)."""
    request = pb.SubmitActionRequest(game_id=game_id, action=action,
                                     request_id=uuid.uuid4().hex)
    if expected_version is not None:
        request.expected_version = expected_version
    try:
        await conn.call(conn.stub.SubmitAction, request, token)
    except grpc.aio.AioRpcError as error:
        reason = error_reason(error)
        if reason == "STALE_VERSION":
            return "[yellow]the table moved on before your move: look again[/]"
        return f"[red]refused ({reason or error.code().name}): {error.details()}[/]"
    return ""


async def until_quit(work: Coroutine[Any, Any, None], keys: KeyReader) -> bool:
    """Run ``work`` until it ends or the person quits; True when they quit."""
    task = asyncio.ensure_future(work)
    quit_task = asyncio.ensure_future(keys.quit.wait())
    done, _ = await asyncio.wait({task, quit_task}, return_when=asyncio.FIRST_COMPLETED)
    if quit_task in done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return True
    quit_task.cancel()
    task.result()
    return False


async def sit(conn: Connection, held: seats_file.HeldSeat) -> int:
    """Play a held seat until the person quits; the exit status."""
    with KeyReader() as keys:
        await until_quit(session(conn, held.game_id, held.seat, held.token, keys), keys)
        interrupted = keys.interrupted
    console.print(f"\nyou left seat {held.seat}; `tapis join {held.game_id}` takes it back")
    return 130 if interrupted else 0


async def ask_yes(question: str) -> bool:
    """A yes/no question on the terminal (Enter = yes); yes when input is not a terminal."""
    if not sys.stdin.isatty():
        return True
    with KeyReader() as keys:
        keys.discard_typed_ahead()  # only what is typed once the question shows answers it
        console.print(question + " [Y/n] ", end="")
        while True:
            key_task = asyncio.ensure_future(keys.keys.get())
            quit_task = asyncio.ensure_future(keys.quit.wait())
            done, _ = await asyncio.wait({key_task, quit_task},
                                         return_when=asyncio.FIRST_COMPLETED)
            if quit_task in done:
                key_task.cancel()
                raise KeyboardInterrupt
            quit_task.cancel()
            key = key_task.result().lower()
            if key in ENTER or key == "y":
                console.print("yes")
                return True
            if key == "n":
                console.print("no")
                return False


async def join(conn: Connection, game_id: str, name: str, seat: int | None = None,
               fresh: bool = False) -> seats_file.HeldSeat:
    """The seat to play at ``game_id``: the one this person left there (offered back), else
    a free one, remembered for next time."""
    held = None if fresh else seats_file.find(game_id)
    if held is not None and (seat is None or seat == held.seat):
        try:
            view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                    held.token)).game
        except grpc.aio.AioRpcError as error:
            if error.code() not in (grpc.StatusCode.PERMISSION_DENIED,
                                    grpc.StatusCode.UNAUTHENTICATED,
                                    grpc.StatusCode.NOT_FOUND):
                raise
            seats_file.forget(game_id)
        else:
            if view.HasField("your_seat") and await ask_yes(
                    f"you left seat {held.seat} of this table: take it back?"):
                return held
    request = pb.JoinGameRequest(game_id=game_id, display_name=name,
                                 request_id=uuid.uuid4().hex)
    if seat is not None:
        request.seat = seat
    joined = await conn.call(conn.stub.JoinGame, request)
    held = seats_file.HeldSeat(game_id, joined.seat, joined.seat_token, conn.target, name)
    seats_file.remember(held)
    return held


def create_request(args: argparse.Namespace, people: int) -> pb.CreateGameRequest:
    kind = games.KINDS[args.kind]
    players = max(args.players or 2, people)
    configs = [pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * people + [
        pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy=args.bot)] * (players - people)
    request = pb.CreateGameRequest(kind=kind, seats=players, seat_configs=configs,
                                   turn_time_limit_ms=args.turn_time_ms,
                                   request_id=uuid.uuid4().hex)
    if args.seed is not None:
        request.seed = args.seed
    if args.points:
        if kind == pb.GAME_KIND_WAR:
            request.war.target_points = args.points
        elif kind == pb.GAME_KIND_BASRA:
            request.basra.target = args.points
    return request


def _sitter(listing: pb.GameListing, seat: int, name: str) -> str:
    """Who sits at ``seat`` in ``tapis list``: a name, "-" for an open seat, "bot" for a
    taken seat without a name (the server's bots have none)."""
    if name:
        return name
    return "-" if seat in listing.open_seats else "bot"


async def list_games(conn: Connection, args: argparse.Namespace) -> None:
    """Every table (page after page), as JSON, plain tab-separated lines when piped, or a
    table on a terminal; ids are never cut."""
    listings: list[pb.GameListing] = []
    token = ""
    while True:
        page = await conn.call(conn.stub.ListGames, pb.ListGamesRequest(
            include_finished=args.all, page_size=args.page_size, page_token=token))
        listings.extend(page.games)
        token = page.next_page_token
        if not token or (args.limit and len(listings) >= args.limit):
            break
    if args.limit:
        listings = listings[:args.limit]
    if args.json:
        print(json.dumps([json_format.MessageToDict(g, preserving_proto_field_name=True,
                                                    always_print_fields_with_no_presence=True)
                          for g in listings], indent=1))
        return
    rows = [(g.game_id, pb.GameKind.Name(g.kind)[10:].lower(),
             pb.GameStatus.Name(g.status)[12:].lower(), str(g.seats),
             ", ".join(map(str, g.open_seats)) or "-", str(g.game_number),
             ", ".join(_sitter(g, seat, name) for seat, name in enumerate(g.display_names)))
            for g in listings]
    header = ("game", "kind", "status", "seats", "open seats", "game #", "players")
    if not console.is_terminal:
        for row in (header, *rows):
            print("\t".join(row))
        return
    grid = Table()
    grid.add_column("game", no_wrap=True, min_width=max((len(r[0]) for r in rows), default=4))
    for column in header[1:]:
        grid.add_column(column)
    for row in rows:
        grid.add_row(*row)
    if len(rows) + 4 > console.height:  # longer than the screen: page it (less, $PAGER)
        with console.pager(styles=True):
            console.print(grid)
    else:
        console.print(grid)
    if not rows:
        console.print("no tables yet: `tapis create` or `tapis play` makes one")


async def run(args: argparse.Namespace) -> int:
    conn = Connection(args.target, retry_for_s=None,
                      credentials=Credentials.from_options(args))
    try:
        await conn.reach()
        if args.command in ("play", "create"):
            people = 1 if args.command == "play" else args.people
            created = (await conn.call(conn.stub.CreateGame,
                                       create_request(args, people))).game
            if args.command == "create":
                if sys.stdout.isatty():
                    console.print(f"table [bold]{created.game_id}[/] created; join it with "
                                  f"`tapis join {created.game_id}`")
                else:
                    print(created.game_id)
                return 0
            return await sit(conn, await join(conn, created.game_id, args.name, fresh=True))
        if args.command == "join":
            held = await join(conn, args.game_id, args.name, args.seat, args.new_seat)
            return await sit(conn, held)
        if args.command == "watch":
            with KeyReader(quit_on_eof=False) as keys:
                await until_quit(session(conn, args.game_id, None, None, keys), keys)
                return 130 if keys.interrupted else 0
        if args.command == "list":
            await list_games(conn, args)
        return 0
    finally:
        await conn.close()


def _default_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "player"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tapis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target(parser, False)
    common = global_parent(add_target)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("play", "play against the computer"),
                       ("create", "create a table for people")):
        p = sub.add_parser(name, help=text, parents=[common])
        p.add_argument("kind", choices=sorted(games.KINDS), nargs="?", default="war")
        p.add_argument("--players", type=int, default=0, help="seats at the table")
        p.add_argument("--bot", default="", help="the computer players' strategy")
        p.add_argument("--seed", type=int, help="a chosen deal (only a server started with "
                       "--allow-stacked-decks accepts one)")
        p.add_argument("--turn-time-ms", type=int, default=0)
        p.add_argument("--points", type=int, default=0,
                       help="points to win (Bataille, Basra; default: the game's)")
        p.add_argument("--name", default=_default_name(), help="the name others see")
        if name == "create":
            p.add_argument("--people", type=int, default=2, help="seats for people")
    p_join = sub.add_parser("join", help="take a seat in a game (or the one you left)",
                            parents=[common])
    p_join.add_argument("game_id")
    p_join.add_argument("--seat", type=int)
    p_join.add_argument("--name", default=_default_name())
    p_join.add_argument("--new-seat", action="store_true",
                        help="do not offer back a seat you left there")
    p_watch = sub.add_parser("watch", help="follow a table as a spectator", parents=[common])
    p_watch.add_argument("game_id")
    p_list = sub.add_parser("list", help="list the tables", parents=[common])
    p_list.add_argument("--all", action="store_true", help="include finished games")
    p_list.add_argument("--json", action="store_true", help="JSON, one object per table")
    p_list.add_argument("--page-size", type=int, default=0, help="tables per call")
    p_list.add_argument("--limit", type=int, default=0, help="at most this many")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        status = asyncio.run(run(args))
    except Unreachable as error:
        print(f"tapis: {error}", file=sys.stderr)
        sys.exit(2)
    except grpc.aio.AioRpcError as error:
        console.print(f"[red]{error.code().name} {error_reason(error)}: {error.details()}[/]")
        sys.exit(1)
    except (KeyboardInterrupt, EOFError):
        sys.exit(130)
    except BrokenPipeError:  # `tapis list | head`: the reader left, which is no error
        _quiet_stdout()
        sys.exit(0)
    sys.exit(status)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit does not fail on the closed pipe
    again (the recipe of the Python docs, `signal` module: "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    main()
