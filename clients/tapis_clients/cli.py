"""`tapis`: play and watch Tapis games in a terminal.

    tapis play war                      play Bataille against the computer
    tapis play basra --players 4        you and three computer players
    tapis create war --people 2         a table for two people (prints its id)
    tapis join GAME_ID                  take a free seat and play
    tapis watch GAME_ID                 follow a game as a spectator
    tapis list                          the games on the server
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections import deque

import grpc
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games
from tapis_clients.connection import DEFAULT_TARGET, Connection, error_reason

console = Console()


class Screen:
    """The table on screen: the caller's view and the latest event lines."""

    def __init__(self, kind: int, seat: int | None) -> None:
        self.kind = kind
        self.seat = seat
        self.lines: deque[str] = deque(maxlen=10)
        self.changed = asyncio.Event()
        self.ended = False

    def draw(self, view: pb.GameView) -> None:
        if console.is_terminal:
            console.clear()
        title = f"{pb.GameKind.Name(view.kind)[10:].replace('_', ' ').title()} · {view.game_id}"
        console.print(Panel(games.module_for(self.kind).render(view), title=title))
        board = view.scoreboard
        if board.games_played:
            wins = ", ".join(f"seat {i}: {w}" for i, w in enumerate(board.wins))
            console.print(f"series after {board.games_played} game(s): {wins}, "
                          f"draws: {board.draws}")
        for line in self.lines:
            console.print(Text.from_markup("  " + line))

    async def follow(self, conn: Connection, game_id: str, token: str | None) -> None:
        async for event in conn.events(game_id, 0, token):
            line = games.describe_event(self.kind, event, self.seat)
            if line:
                self.lines.append(line)
            self.changed.set()


def _menu(kind: int, actions: list[pb.Action]) -> str:
    parts = []
    for i, action in enumerate(actions, 1):
        key = games.module_for(kind).hotkey(action) if action.WhichOneof("action") in (
            games.FIELDS[kind],) else None
        parts.append(f"[{i}{'/' + key if key else ''}] {games.describe_action(kind, action)}")
    return "\n".join(parts)


def _pick(kind: int, actions: list[pb.Action], answer: str) -> pb.Action | None:
    answer = answer.strip().lower()
    if not actions:
        return None
    if not answer:
        return actions[0]
    if answer.isdigit() and 1 <= int(answer) <= len(actions):
        return actions[int(answer) - 1]
    for action in actions:
        if action.WhichOneof("action") == games.FIELDS[kind] and \
                games.module_for(kind).hotkey(action) == answer:
            return action
    return None


async def submit(conn: Connection, game_id: str, action: pb.Action, token: str,
                 screen: Screen) -> None:
    """Play a move; a refusal goes to the screen's event lines, with its reason."""
    try:
        await conn.call(conn.stub.SubmitAction, pb.SubmitActionRequest(
            game_id=game_id, action=action, request_id=uuid.uuid4().hex), token)
    except grpc.aio.AioRpcError as error:
        screen.lines.append(f"[red]refused ({error_reason(error)}): {error.details()}[/]")


async def play_loop(conn: Connection, game_id: str, seat: int, token: str) -> None:
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id), token)).game
    screen = Screen(view.kind, seat)
    follower = asyncio.create_task(screen.follow(conn, game_id, token))
    try:
        while True:
            screen.changed.clear()
            view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                    token)).game
            screen.draw(view)
            actions = list(view.legal_actions)
            if not actions:
                if view.status == pb.GAME_STATUS_WAITING_FOR_PLAYERS:
                    console.print("[dim]waiting for the other players to sit…[/]")
                await screen.changed.wait()
                continue
            console.print(_menu(view.kind, actions))
            answer = await asyncio.to_thread(input, "your move (Enter = 1, q = quit) › ")
            if answer.strip().lower() == "q":
                return
            fresh = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                     token)).game
            # Real-time games move on while you type: act on the table as it is now.
            picked = _pick(view.kind, list(fresh.legal_actions), answer) \
                if fresh.version != view.version else _pick(view.kind, actions, answer)
            if picked is None:
                screen.lines.append("[red]no such move[/]")
                continue
            await submit(conn, game_id, picked, token, screen)
    finally:
        follower.cancel()


async def live_loop(conn: Connection, game_id: str, seat: int, token: str) -> None:
    """Real-time play (Bataille Corse on a terminal): the table redraws at every event and
    single keys act at once — the game's hotkeys (f flips, s slaps), q quits."""
    import termios
    import tty

    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id), token)).game
    screen = Screen(view.kind, seat)
    keys: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    loop.add_reader(fd, lambda: keys.put_nowait(sys.stdin.read(1)))
    follower = asyncio.create_task(screen.follow(conn, game_id, token))
    module = games.module_for(view.kind)
    try:
        while True:
            view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                    token)).game
            screen.draw(view)
            console.print("[dim]keys: " + ", ".join(
                f"{module.hotkey(a)} = {games.describe_action(view.kind, a)}"
                for a in view.legal_actions if a.WhichOneof("action") == games.FIELDS[view.kind]
                and module.hotkey(a)) + ", Enter = next game when over, q = quit[/]")
            screen.changed.clear()
            key_task = asyncio.ensure_future(keys.get())
            change_task = asyncio.ensure_future(screen.changed.wait())
            done, _ = await asyncio.wait({key_task, change_task},
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in (key_task, change_task):
                if task not in done:
                    task.cancel()
            if key_task not in done:
                continue
            key = key_task.result().lower()
            if key == "q":
                return
            fresh = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                     token)).game
            picked = _pick(view.kind, list(fresh.legal_actions), "" if key == "\n" else key)
            if picked is None:
                continue
            await submit(conn, game_id, picked, token, screen)
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        follower.cancel()


async def take_seat(conn: Connection, game_id: str, seat: int, token: str, kind: int) -> None:
    """Play a seat: live keys for the real-time game on a terminal, else move by move."""
    if kind == pb.GAME_KIND_BATAILLE_CORSE and sys.stdin.isatty():
        await live_loop(conn, game_id, seat, token)
    else:
        await play_loop(conn, game_id, seat, token)


async def watch(conn: Connection, game_id: str) -> None:
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id))).game
    screen = Screen(view.kind, None)
    async for event in conn.events(game_id, 0):
        line = games.describe_event(view.kind, event, None)
        if line:
            screen.lines.append(line)
        if event.WhichOneof("body") == "game_ended":
            view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id))).game
            screen.draw(view)
            return
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id))).game
        screen.draw(view)


async def run(args: argparse.Namespace) -> None:
    conn = Connection(args.target, retry_for_s=30)
    try:
        if args.command in ("play", "create"):
            kind = games.KINDS[args.kind]
            people = 1 if args.command == "play" else args.people
            players = max(args.players or 2, people)
            configs = [pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * people + [
                pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy=args.bot)] * (players - people)
            request = pb.CreateGameRequest(kind=kind, seats=players, seat_configs=configs,
                                           turn_time_limit_ms=args.turn_time_ms,
                                           request_id=uuid.uuid4().hex)
            if args.seed is not None:
                request.seed = args.seed
            created = (await conn.call(conn.stub.CreateGame, request)).game
            if args.command == "create":
                console.print(f"game [bold]{created.game_id}[/] created; join it with "
                              f"`tapis join {created.game_id}`")
                print(created.game_id)
                return
            joined = await conn.call(conn.stub.JoinGame, pb.JoinGameRequest(
                game_id=created.game_id, display_name=args.name, request_id=uuid.uuid4().hex))
            await take_seat(conn, created.game_id, joined.seat, joined.seat_token, kind)
        elif args.command == "join":
            join = pb.JoinGameRequest(game_id=args.game_id, display_name=args.name,
                                      request_id=uuid.uuid4().hex)
            if args.seat is not None:
                join.seat = args.seat
            joined = await conn.call(conn.stub.JoinGame, join)
            console.print(f"you sit at seat {joined.seat}")
            await take_seat(conn, args.game_id, joined.seat, joined.seat_token, joined.game.kind)
        elif args.command == "watch":
            await watch(conn, args.game_id)
        elif args.command == "list":
            listing = await conn.call(conn.stub.ListGames, pb.ListGamesRequest(
                include_finished=args.all))
            grid = Table("game", "kind", "status", "seats", "open seats", "game #")
            for g in listing.games:
                grid.add_row(g.game_id, pb.GameKind.Name(g.kind)[10:].lower(),
                             pb.GameStatus.Name(g.status)[12:].lower(), str(g.seats),
                             ", ".join(map(str, g.open_seats)) or "—", str(g.game_number))
            console.print(grid)
    finally:
        await conn.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tapis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default=DEFAULT_TARGET, help="server HOST:PORT")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("play", "play against the computer"),
                       ("create", "create a table for people")):
        p = sub.add_parser(name, help=text)
        p.add_argument("kind", choices=sorted(games.KINDS), nargs="?", default="war")
        p.add_argument("--players", type=int, default=0, help="seats at the table")
        p.add_argument("--bot", default="", help="the computer players' strategy")
        p.add_argument("--seed", type=int)
        p.add_argument("--turn-time-ms", type=int, default=0)
        p.add_argument("--name", default="you")
        if name == "create":
            p.add_argument("--people", type=int, default=2, help="seats for people")
    p_join = sub.add_parser("join", help="take a seat in a game")
    p_join.add_argument("game_id")
    p_join.add_argument("--seat", type=int)
    p_join.add_argument("--name", default="you")
    p_watch = sub.add_parser("watch", help="follow a game as a spectator")
    p_watch.add_argument("game_id")
    p_list = sub.add_parser("list", help="list the games")
    p_list.add_argument("--all", action="store_true", help="include finished games")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        asyncio.run(run(args))
    except grpc.aio.AioRpcError as error:
        console.print(f"[red]{error.code().name} {error_reason(error)}: {error.details()}[/]")
        sys.exit(1)
    except (KeyboardInterrupt, EOFError):
        sys.exit(130)


if __name__ == "__main__":
    main()
