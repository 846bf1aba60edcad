"""`tapis`: play and watch Tapis games in a terminal (``USAGE`` below is what `tapis --help`
says first, in the reader's language)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import sys
import uuid
from collections.abc import Callable, Mapping

import grpc
from rich.console import Console

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import app, checks, games, i18n, refusals, seats_file
from tapis_clients.connection import Connection, Credentials, Unreachable
from tapis_clients.i18n import N_, _
from tapis_clients.keys import KeyReader
from tapis_clients.listing import list_games
from tapis_clients.local_bots import LocalBots
from tapis_clients.options import (
    MAX_PLAYERS,
    UINT32_MAX,
    UINT64_MAX,
    add_cli_globals,
    bounded,
    bounded_float,
    global_parent,
)

console = Console()
ENTER = ("\r", "\n")

USAGE = N_("""\
  tapis play war               play Bataille against the computer
  tapis play KIND --players 4  you and three computer players
  tapis create war --people 2  a table for two people (prints its id)
  tapis join GAME_ID           take a free seat (or the one you left) and play
  tapis watch GAME_ID          follow a table as a spectator, game after game
  tapis list [--json]          the tables on the server
  tapis replace-seat GAME_ID SEAT --api-key KEY [--player-id ID --name NAME]
                               a backend gives a seat of its table to a player
                               (without --player-id: to a bot for good)

--target HOST:PORT (before or after the subcommand; or TAPIS_TARGET, or
TAPIS_PORT) names the server; --lang fr|en the language (else LC_ALL,
LC_MESSAGES, LANG). While playing: the keys or numbers of the menu act at once
(Enter = the first move); q or Ctrl-C leave at any moment, and
`tapis join GAME_ID` takes your seat back later.""")
"""What `tapis --help` says first (the module's docstring, in the reader's language), written
within 78 columns in every language (argparse prints it as it is)."""



async def ask_yes(question: str) -> bool:
    """A yes/no question on the terminal (Enter = yes); yes when input is not a terminal."""
    if not sys.stdin.isatty():
        return True
    with KeyReader() as keys:
        keys.discard_typed_ahead()  # only what is typed once the question shows answers it
        console.print(question + " " + _("[Y/n]"), end=" ", markup=False)
        yes = {"y", _("y")}
        no = {"n", _("n")}
        while True:
            key_task = asyncio.ensure_future(keys.keys.get())
            quit_task = asyncio.ensure_future(keys.quit.wait())
            done, _pending = await asyncio.wait({key_task, quit_task},
                                                return_when=asyncio.FIRST_COMPLETED)
            if quit_task in done:
                key_task.cancel()
                raise KeyboardInterrupt
            quit_task.cancel()
            key = key_task.result().lower()
            if key in ENTER or key in yes:
                console.print(_("yes"))
                return True
            if key in no:
                console.print(_("no"))
                return False


class SeatInUse(Exception):
    """Every seat this person holds at the table is played in another terminal, and they
    did not want a new one."""


async def _still_mine(conn: Connection, held: seats_file.HeldSeat) -> bool:
    """The server still knows the stored seat token."""
    try:
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=held.game_id),
                                held.token)).game
    except grpc.aio.AioRpcError as error:
        if error.code() not in (grpc.StatusCode.PERMISSION_DENIED,
                                grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND):
            raise
        seats_file.forget(held.game_id, seat=held.seat)
        return False
    return view.HasField("your_seat")


async def _has_free_seat(conn: Connection, game_id: str, token: str) -> bool:
    """Whether the table has a seat for a person that nobody took (nor a backend kept), as
    GetGame shows it with the token of a seat held there (else as a spectator sees it)."""
    try:
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                token)).game
    except grpc.aio.AioRpcError as error:
        if error.code() not in (grpc.StatusCode.UNAUTHENTICATED,
                                grpc.StatusCode.PERMISSION_DENIED):
            raise
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id))).game
    return any(s.type == pb.SEAT_TYPE_PERSON and not s.taken and not s.reserved
               for s in view.seats)


async def join(conn: Connection, game_id: str, name: str | Callable[[], str],
               seat: int | None = None, fresh: bool = False
               ) -> tuple[seats_file.HeldSeat, seats_file.SeatLock]:
    """The seat to play at ``game_id`` and its lock: one this person left there (offered back),
    else a free one (``name``, asked for only then), remembered for next time. A seat another
    terminal plays is never taken over: the person is told, and offered a free seat when the
    table has one."""
    in_use: list[seats_file.HeldSeat] = []
    for held in ([] if fresh else seats_file.find_all(game_id)):
        if seat is not None and seat != held.seat:
            continue
        lock = seats_file.SeatLock(game_id, held.seat)
        if not lock.acquire():
            in_use.append(held)
            continue
        if await _still_mine(conn, held) and await ask_yes(
                _("You left seat {seat} ({name}) of this table: take it back?").format(
                    seat=held.seat, name=held.name or "?")):
            return held, lock
        lock.release()
    if in_use:
        console.print(_("Seat {seats} of this table is in use in another terminal of "
                        "yours.").format(seats=", ".join(str(held.seat) for held in in_use)))
        if seat is not None:
            raise SeatInUse
        if not await _has_free_seat(conn, game_id, in_use[0].token):
            console.print(_("No other seat of this table is free."))
            raise SeatInUse
        if not await ask_yes(_("Take a free seat instead?")):
            raise SeatInUse
    request = pb.JoinGameRequest(game_id=game_id, display_name=name if isinstance(name, str)
                                 else name(), request_id=uuid.uuid4().hex)
    if seat is not None:
        request.seat = seat
    joined = await conn.call(conn.stub.JoinGame, request)
    held = seats_file.HeldSeat(game_id, joined.seat, joined.seat_token, conn.target,
                               request.display_name)
    lock = seats_file.SeatLock(game_id, held.seat)
    lock.acquire()
    seats_file.remember(held)
    return held, lock


async def sit(conn: Connection, held: seats_file.HeldSeat, lock: seats_file.SeatLock) -> int:
    """Play a held seat full screen until the person leaves; the exit status."""
    bots = None
    if held.bots:
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=held.game_id),
                                held.token)).game
        bots = LocalBots(conn, held.game_id, view.kind, held.bots, held.bot_ms)
    try:
        status = await app.show(conn, held.game_id, held.seat, held.token)
    finally:
        if bots is not None:
            await bots.stop()
        lock.release()
    if status == 1:  # the seat was given to someone else: it is not this person's any more
        seats_file.forget(held.game_id, seat=held.seat)
        return status
    console.print(_("You left seat {seat}; `tapis join {game_id}` takes it back.").format(
        seat=held.seat, game_id=held.game_id), markup=False)
    return status


def create_request(args: argparse.Namespace, people: int) -> pb.CreateGameRequest:
    game = games.by_command(args.kind)
    players = checks.seats_asked(args, game, people)
    bots = players - people
    configs = [pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * people + [
        pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy=args.bot)] * bots
    turn_ms = args.turn_time_ms
    if turn_ms is None:
        turn_ms = game.default_turn_ms if args.command == "play" else 0
    request = pb.CreateGameRequest(kind=game.kind, seats=players, seat_configs=configs,
                                   turn_time_limit_ms=turn_ms, request_id=uuid.uuid4().hex)
    if args.seed is not None:
        request.seed = args.seed
    if args.bot_speed is not None:  # else the server's (1 s unless it says otherwise)
        request.bot_reaction_ms = round(args.bot_speed * 1000)
    if args.points and game.set_points is not None:
        game.set_points(request, args.points)
    if game.set_options is not None:
        game.set_options(request, args)
    return request


async def play(conn: Connection, args: argparse.Namespace) -> int:
    """Create a table against the computer (the server's bots, the same as the web table's,
    at the reaction time ``--bot-speed`` asks for, else the server's) and sit at seat 0."""
    created = (await conn.call(conn.stub.CreateGame, create_request(args, 1))).game
    request = pb.JoinGameRequest(game_id=created.game_id, display_name=display_name(args.name),
                                 seat=0, request_id=uuid.uuid4().hex)
    joined = await conn.call(conn.stub.JoinGame, request)
    held = seats_file.HeldSeat(created.game_id, joined.seat, joined.seat_token, conn.target,
                               request.display_name)
    seats_file.remember(held)
    lock = seats_file.SeatLock(created.game_id, held.seat)
    lock.acquire()
    return await sit(conn, held, lock)


async def replace_seat(conn: Connection, args: argparse.Namespace) -> int:
    """A backend's ReplaceSeat: print the new holder's token (the ticket to hand over), or
    nothing when a bot keeps the seat."""
    replaced = (await conn.call(conn.stub.ReplaceSeat, pb.ReplaceSeatRequest(
        game_id=args.game_id, seat=args.seat, player_id=args.player_id,
        display_name=args.name, request_id=uuid.uuid4().hex))).seat_token
    if not sys.stdout.isatty():
        if replaced.seat_token:
            print(replaced.seat_token)
        return 0
    if replaced.seat_token:
        console.print(_("Seat {seat} is {player}'s now; their token: {token}").format(
            seat=replaced.seat, player=replaced.player_id, token=replaced.seat_token),
            markup=False)
    else:
        console.print(_("Seat {seat} is played by a bot from now on.").format(
            seat=replaced.seat), markup=False)
    return 0


async def run(args: argparse.Namespace) -> int:
    conn = Connection(args.target, retry_for_s=None,
                      credentials=Credentials.from_options(args))
    try:
        await conn.reach()
        if args.command == "play":
            return await play(conn, args)
        if args.command == "create":
            created = (await conn.call(conn.stub.CreateGame,
                                       create_request(args, args.people))).game
            if sys.stdout.isatty():
                console.print(_("Table {game_id} created; join it with `tapis join "
                                "{game_id}`").format(game_id=created.game_id), markup=False)
            else:
                print(created.game_id)
            return 0
        if args.command == "join":
            try:
                held, lock = await join(conn, args.game_id, lambda: display_name(args.name),
                                        args.seat, args.new_seat)
            except SeatInUse:
                return 1
            return await sit(conn, held, lock)
        if args.command == "watch":
            return await app.show(conn, args.game_id, None, None)
        if args.command == "replace-seat":
            return await replace_seat(conn, args)
        if args.command == "list":
            await list_games(conn, args)
        return 0
    finally:
        await conn.close()


NAME_FILE = "name"
"""The display name asked once, kept beside the seats file."""
MAX_BOT_SPEED_S = 60
"""The slowest reaction a table may ask of its bots (the server's limit, 60 s)."""
MAX_PAGE_SIZE = 1000
"""The most tables ListGames answers at once (ListGamesRequest.page_size)."""


def display_name(given: str | None, environ: Mapping[str, str] | None = None,
                 ask: Callable[[str], str] | None = None) -> str:
    """The name others see: ``--name``, else ``$TAPIS_NAME``, else the one asked once on a
    terminal and kept (``$TAPIS_STATE_DIR/name``), else (no terminal to ask on) the login."""
    env = os.environ if environ is None else environ
    if given:
        return given
    if env.get("TAPIS_NAME", "").strip():
        return env["TAPIS_NAME"].strip()
    kept = seats_file.path(env).parent / NAME_FILE
    with contextlib.suppress(OSError):
        if name := kept.read_text(encoding="utf-8").strip():
            return name
    if ask is None and sys.stdin.isatty():
        ask = input
    if ask is not None:
        with contextlib.suppress(EOFError):
            if name := ask(_("Your name at the tables (others see it): ")).strip():
                with contextlib.suppress(OSError):
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    kept.write_text(name + "\n", encoding="utf-8")
                return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return _("player")


def _language_asked(argv: list[str]) -> str | None:
    """``--lang`` from the command line, read before the parser exists (its help is said in
    that language)."""
    for i, arg in enumerate(argv):
        if arg == "--lang" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--lang="):
            return arg.partition("=")[2]
    return None


def NAME_HELP() -> str:
    return _("the name others see (default: $TAPIS_NAME, else the one asked once and kept)")


ARGPARSE_TEXTS = (
    N_("usage: "), N_("positional arguments"), N_("options"),
    N_("show this help message and exit"), N_("%(prog)s: error: %(message)s\n"),
    N_("argument %(argument_name)s: %(message)s"), N_("expected one argument"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"), N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"), N_("ambiguous option: %(option)s could match %(matches)s"),
)
"""argparse's own words (its headings, its errors), for the catalog: `tapis --help` says them
in the reader's language too."""


def _argparse_speaks() -> None:
    """argparse's words through the client's catalogs (it looks ``_`` up in its module)."""
    argparse._ = i18n._  # type: ignore[attr-defined]
    argparse.ngettext = i18n.ngettext  # type: ignore[attr-defined]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, its help in the language chosen (``--lang``, else the environment)."""
    argv = sys.argv[1:] if argv is None else argv
    i18n.use(i18n.language_from(_language_asked(argv)))
    _argparse_speaks()
    parser, commands = _parsers()
    args = parser.parse_args(argv)
    if args.command in ("play", "create"):
        problem = checks.game_options_problem(args)
        if problem:  # said by the subcommand's parser, as argparse says its own checks
            commands[args.command].error(problem)
    return args


def build_parser() -> argparse.ArgumentParser:
    """`tapis`'s parser, in the language in use. Every number is checked against its field's
    range in the contract (and any bound the docs give) before a call is made."""
    return _parsers()[0]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """`tapis`'s parser, and each subcommand's by its name (whose errors name the command used,
    ``usage: tapis play ...``)."""
    parser = argparse.ArgumentParser(prog="tapis", description=_(USAGE),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cli_globals(parser, False)
    common = global_parent(add_cli_globals)
    sub = parser.add_subparsers(dest="command", required=True)
    commands: dict[str, argparse.ArgumentParser] = {}
    for name, text in (("play", _("play against the computer")),
                       ("create", _("create a table for people"))):
        p = commands[name] = sub.add_parser(name, help=text, description=text, parents=[common])
        p.add_argument("kind", choices=sorted(games.KINDS), nargs="?", default="war")
        p.add_argument("--players", type=bounded(0, MAX_PLAYERS), default=0, metavar="N",
                       help=_("seats at the table"))
        # The server alone checks the name: the contract lists no strategies (its refusal is
        # said with its words, refusals.PRECISE; README).
        p.add_argument("--bot", default="", metavar=_("STRATEGY"),
                       help=_("the server's computer players' strategy"))
        p.add_argument("--seed", type=bounded(0, UINT64_MAX), metavar="N", help=_(
            "a chosen deal (only a server started with --allow-stacked-decks accepts one)"))
        turn_defaults = ", ".join(f"{game.commands[0]} {game.default_turn_ms // 1000} s"
                                  for game in games.GAMES if game.default_turn_ms)
        p.add_argument("--turn-time-ms", type=bounded(0, UINT32_MAX), default=None,
                       metavar="MS", help=_(
            "time each player has to move, in ms, after which a bot moves for them (0: no "
            "timer; `tapis play` default: {defaults}, else none)").format(
            defaults=turn_defaults))
        with_points = ", ".join(g.title for g in games.GAMES if g.set_points is not None)
        p.add_argument("--points", type=bounded(0, UINT32_MAX), default=0, metavar="N", help=_(
            "points to win ({games}; default: the game's)").format(games=with_points))
        for game in games.GAMES:
            if game.add_options is not None:
                game.add_options(p)
        p.add_argument("--name", metavar=_("NAME"), help=NAME_HELP())
        p.add_argument("--bot-speed", type=bounded_float(0, MAX_BOT_SPEED_S), default=None,
                       metavar=_("SECONDS"),
                       help=_("how fast the server's computer players react, in seconds (a "
                              "person's reaction time around it; at most 60); default: the "
                              "server's, 1 s unless it says otherwise"))
        if name == "create":
            p.add_argument("--people", type=bounded(0, MAX_PLAYERS), default=2, metavar="N",
                           help=_("seats for people"))
    p_join = sub.add_parser("join", help=_("take a seat in a game (or the one you left)"),
                            parents=[common])
    p_join.add_argument("game_id", metavar="GAME_ID")
    p_join.add_argument("--seat", type=bounded(0, UINT32_MAX), metavar="N",
                        help=_("this seat (a number from 0)"))
    p_join.add_argument("--name", metavar=_("NAME"), help=NAME_HELP())
    p_join.add_argument("--new-seat", action="store_true",
                        help=_("do not offer back a seat you left there"))
    p_watch = sub.add_parser("watch", help=_("follow a table as a spectator"),
                             parents=[common])
    p_watch.add_argument("game_id", metavar="GAME_ID")
    p_replace = sub.add_parser(
        "replace-seat", parents=[common],
        help=_("a backend gives a seat of its table to a player (needs --api-key)"))
    p_replace.add_argument("game_id", metavar="GAME_ID")
    p_replace.add_argument("seat", type=bounded(0, UINT32_MAX), metavar="SEAT",
                           help=_("the seat (a number from 0)"))
    p_replace.add_argument("--player-id", default="", metavar="ID", help=_(
        "the backend's player who holds the seat from now on (none: a bot keeps it)"))
    p_replace.add_argument("--name", default="", metavar=_("NAME"), help=_(
        "the name others see (default: the player id)"))
    p_list = sub.add_parser("list", help=_("list the tables"), parents=[common])
    p_list.add_argument("--all", action="store_true",
                        help=_("include finished tables nobody plays on"))
    p_list.add_argument("--json", action="store_true", help=_("JSON, one object per table"))
    p_list.add_argument("--page-size", type=bounded(0, MAX_PAGE_SIZE), default=0, metavar="N",
                        help=_("tables per call"))
    p_list.add_argument("--limit", type=bounded(0), default=0, metavar="N",
                        help=_("at most this many"))
    return parser, commands


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        status = asyncio.run(run(args))
    except Unreachable as error:
        print(f"tapis: {error}", file=sys.stderr)
        sys.exit(2)
    except grpc.aio.AioRpcError as error:
        print(f"tapis: {refusals.explain(error)}", file=sys.stderr)
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
