"""`tapis-bot`: a bot that plays any Tapis game through the public API.

    tapis-bot play --game GAME_ID [--seat N]         take a seat and play it to the end
    tapis-bot play --game GAME_ID --strategy mybot:choose   ...with your own strategy
    tapis-bot selfplay --kind war --games 50         create games, fill every seat with bots

Global options (--target, --reaction-ms, --mistake-rate) go before or after the subcommand.

It only uses the tapis.v1 contract: it follows its event stream, and when the game awaits its
seat it reads its view and picks one of the legal actions the server lists. In a real-time game
(where any seat may act after any move, as a slap after a flip) it keeps the table up to date
from the events alone (the game's ``follower``, tapis_clients.games).
A strategy is a function (view, legal_actions) -> action; see tapis_clients.strategies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import checks, games, strategies
from tapis_clients.connection import (
    Connection,
    Credentials,
    Unreachable,
    error_reason,
    retry_delay_s,
)
from tapis_clients.game import Follower
from tapis_clients.options import (
    MAX_PLAYERS,
    UINT32_MAX,
    UINT64_MAX,
    add_target,
    bounded,
    bounded_float,
    global_parent,
)
from tapis_clients.progress import Progress

NORMAL_REFUSALS = {"STALE_VERSION", "SLAP_TOO_LATE", "NOT_YOUR_TURN", "RATE_LIMITED",
                   "GAME_OVER", "NOT_ALLOWED_NOW"}
"""Refusals a real-time bot meets in a fair race: the table moved before its action landed."""

RATE_LIMITED_PAUSE_S = 0.1
"""Without a delay named by the server, a rate-limited move waits one token of the server's
default slap limit (10 per second)."""


@dataclass
class Stats:
    actions: int = 0
    refused: int = 0
    rate_limited: int = 0
    idle_checks: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class BotStyle:
    reaction_ms: int = 0
    mistake_rate: float = 0.0


REWOUND_TRIES = 3
"""How many times a bot follows a table again after its stream refused the bot's cursor."""
IDLE_CHECK_S = 3.0
"""With no event for this long, the bot looks at the table itself (an event or an answer may
have been lost with a server that crashed). Counted in ``idle_checks``: 0 in a healthy run."""


def action_kind(action: pb.Action) -> str:
    """``war.reveal``, ``reclaim_seat``: what a rate limit is about (the game's field and the
    move's)."""
    which = action.WhichOneof("action") or ""
    inner = getattr(action, which, None) if which else None
    if inner is not None and inner.DESCRIPTOR.oneofs:
        return f"{which}.{inner.WhichOneof(inner.DESCRIPTOR.oneofs[0].name)}"
    return which


class SeatBot:
    """One seat played by a strategy, event by event."""

    def __init__(self, conn: Connection, game_id: str, seat: int, token: str,
                 strategy: strategies.Strategy, rng: random.Random, style: BotStyle,
                 stats: Stats) -> None:
        self.conn = conn
        self.game_id = game_id
        self.seat = seat
        self.token = token
        self.strategy = strategy
        self.rng = rng
        self.style = style
        self.stats = stats
        self.follower: Follower | None = None
        self.awaiting: tuple[int, ...] = ()
        self.version = 0
        self.acted_version = -1
        self.tried: tuple[int, bytes] | None = None
        self.held: dict[str, float] = {}
        """Action kinds withheld (rate limited) until this loop time."""

    async def fetch(self) -> pb.GameView:
        return (await self.conn.call(self.conn.stub.GetGame,
                                     pb.GetGameRequest(game_id=self.game_id), self.token)).game

    def _legal(self, actions: Sequence[pb.Action]) -> list[pb.Action]:
        now = asyncio.get_running_loop().time()
        return [a for a in actions if self.held.get(action_kind(a), 0.0) <= now]

    def next_wake(self) -> float:
        """Seconds until the bot must look again with no event: a held action comes free."""
        now = asyncio.get_running_loop().time()
        pending = [until - now for until in self.held.values() if until > now]
        return max(0.0, min(pending)) if pending else IDLE_CHECK_S

    def _pick(self, view: pb.GameView, legal: list[pb.Action]) -> pb.Action | None:
        if not legal:
            return None
        if self.style.mistake_rate and self.rng.random() < self.style.mistake_rate:
            return self.rng.choice(legal)
        return self.strategy(view, legal)

    async def decide(self) -> None:
        """Move if there is a move to make on the table as last seen."""
        if self.follower is not None:
            view = self.follower.view
            legal = self._legal(self.follower.legal_actions())
            action = self._pick(view, legal)
            if action is None:
                return
            key = (self.follower.version, action.SerializeToString())
            if key == self.tried:  # already sent on this very table
                return
            self.tried = key
            realtime = games.by_kind(view.kind).realtime(action)
            await self.submit(action, None if realtime else self.follower.version)
            return
        if self.seat not in self.awaiting or self.version <= self.acted_version:
            return
        view = await self.fetch()
        self.acted_version = view.version
        action = self._pick(view, self._legal(list(view.legal_actions)))
        if action is None or action.WhichOneof("action") == "start_next_game":
            return
        await self.submit(action, view.version)

    async def submit(self, action: pb.Action, expected_version: int | None) -> None:
        if self.style.reaction_ms:
            await asyncio.sleep(self.style.reaction_ms * self.rng.uniform(0.7, 1.3) / 1000)
        request = pb.SubmitActionRequest(game_id=self.game_id, action=action,
                                         request_id=uuid.uuid4().hex)
        if expected_version is not None:
            request.expected_version = expected_version
        try:
            await self.conn.call(self.conn.stub.SubmitAction, request, self.token,
                                 retry_exhausted=False)
        except grpc.aio.AioRpcError as error:
            reason = error_reason(error)
            if reason == "RATE_LIMITED":
                self.stats.rate_limited += 1
                pause = retry_delay_s(error) or RATE_LIMITED_PAUSE_S
                self.held[action_kind(action)] = asyncio.get_running_loop().time() + pause
                self.tried = None
                self.acted_version = -1
            if error.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED) \
                    or reason in NORMAL_REFUSALS:
                self.stats.refused += 1
                return
            self.stats.errors.append(f"{error.code().name} {reason}: {error.details()}")
            return
        self.stats.actions += 1

    def see(self, event: pb.Event) -> bool:
        """Take in one event; True when it ends the game being played."""
        if self.follower is not None:
            self.follower.apply(event)
        self.awaiting = tuple(event.awaiting_seats)
        self.version = max(self.version, event.version)
        return event.WhichOneof("body") == "game_ended"

    async def resync(self) -> pb.GameView:
        view = await self.fetch()
        self.version = max(self.version, view.version)
        self.awaiting = tuple(view.awaiting_seats)
        follower = games.by_kind(view.kind).follower
        if follower is not None:
            self.follower = follower(view)
        return view

    async def ended_meanwhile(self) -> bool:
        """After a stream that ended without the game's end in it: whether the game is over
        all the same (the stream may close together with the game's last events)."""
        try:
            view = await self.resync()
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        return view.status == pb.GAME_STATUS_GAME_OVER

    async def play(self) -> bool:
        """Play until the game in play ends; True when it ended. A table found behind what
        the bot saw (restored from an earlier copy: its stream refuses the bot's cursor,
        INVALID_CURSOR) is read again and played on from where it now is, a few times at most
        (a table read again is never behind itself: one refused again is a fault to raise)."""
        tries = 1
        while True:
            try:
                return await self._play()
            except grpc.aio.AioRpcError as error:
                if error_reason(error) != "INVALID_CURSOR" or tries == REWOUND_TRIES:
                    raise
            tries += 1
            self.version, self.acted_version, self.tried = 0, -1, None

    async def _play(self) -> bool:
        view = await self.resync()
        if view.status == pb.GAME_STATUS_GAME_OVER:
            return True
        inbox: asyncio.Queue[pb.Event | None] = asyncio.Queue()

        async def follow() -> None:
            try:
                async for event in self.conn.events(self.game_id, view.last_sequence,
                                                    self.token):
                    inbox.put_nowait(event)
            finally:
                inbox.put_nowait(None)

        follower = asyncio.ensure_future(follow())
        try:
            await self.decide()
            while True:
                wake = self.next_wake()
                try:
                    event = await asyncio.wait_for(inbox.get(), wake)
                except TimeoutError:
                    if wake >= IDLE_CHECK_S:
                        self.stats.idle_checks += 1
                        view = await self.resync()
                        if view.status == pb.GAME_STATUS_GAME_OVER:
                            return True
                        self.acted_version = -1
                        self.tried = None
                    await self.decide()
                    continue
                # Take in every event already here, then decide once on the latest table.
                stream_over = event is None
                ended = event is not None and self.see(event)
                while not stream_over and not inbox.empty():
                    queued = inbox.get_nowait()
                    stream_over = queued is None
                    ended = (queued is not None and self.see(queued)) or ended
                if ended:
                    return True
                if stream_over:
                    await follower  # raises what ended the stream, if anything did
                    return await self.ended_meanwhile()
                await self.decide()
        finally:
            follower.cancel()


async def play_seat(conn: Connection, game_id: str, seat: int, token: str,
                    strategy: strategies.Strategy, rng: random.Random, style: BotStyle,
                    stats: Stats) -> bool:
    """Play ``seat`` until the game in play ends; True when it ended."""
    return await SeatBot(conn, game_id, seat, token, strategy, rng, style, stats).play()


async def selfplay_one(conn: Connection, kind: pb.GameKind.ValueType, players: int, seed: int,
                       style: BotStyle, stats: Stats,
                       strategy: strategies.Strategy | None = None,
                       options: pb.CreateGameRequest | None = None,
                       choose_deal: bool = False) -> bool:
    """One table of ``players`` bots played to its end; ``options`` (a CreateGameRequest with
    the game's options set) changes the game's settings; with ``choose_deal`` the table's seed
    is ``seed`` (only a server started with --allow-stacked-decks accepts a chosen seed)."""
    request = pb.CreateGameRequest(kind=kind, seats=players, request_id=uuid.uuid4().hex)
    if choose_deal:
        request.seed = seed
    if options is not None:
        request.MergeFrom(options)
    created = await conn.call(conn.stub.CreateGame, request)
    game_id = created.game.game_id
    seats = []
    for _ in range(players):
        joined = await conn.call(conn.stub.JoinGame, pb.JoinGameRequest(
            game_id=game_id, display_name="tapis-bot", request_id=uuid.uuid4().hex))
        seats.append((joined.seat, joined.seat_token))
    rng = random.Random(seed)
    bots = []
    for seat, token in seats:
        seat_rng = random.Random(rng.random())
        bots.append(play_seat(conn, game_id, seat, token,
                              strategy or strategies.reference(kind, seat_rng), seat_rng,
                              style, stats))
    results = await asyncio.gather(*bots)
    return all(results)


MAX_SELFPLAY_GAMES = 1_000_000
"""The most games one selfplay run plays (each is a task held until the run ends)."""
SEED_STEP = 1_000_003


def game_seed(seed: int, index: int) -> int:
    """The seed of game ``index`` of a selfplay run with ``--seed seed``: apart for each game,
    and a ``uint64`` as the contract's seed is (sent with --choose-deal)."""
    return (seed * SEED_STEP + index) % 2**64


async def selfplay(args: argparse.Namespace) -> dict[str, object]:
    """Play ``args.games`` self-play games; Ctrl-C or SIGTERM stops them and the summary says
    what finished (``"interrupted": true``)."""
    kind = games.KINDS[args.kind]
    conn = Connection(args.target, credentials=Credentials.from_options(args))
    await conn.reach()
    stats = Stats()
    style = BotStyle(args.reaction_ms, args.mistake_rate)
    strategy = strategies.load(args.strategy) if args.strategy else None
    finished = 0
    started = time.perf_counter()
    limit = asyncio.Semaphore(args.concurrency)
    progress = Progress(args.games, args.progress_every or max(1, args.games // 10), stats)

    async def one(index: int) -> None:
        nonlocal finished
        async with limit:
            try:
                done = await selfplay_one(conn, kind, args.players,
                                          game_seed(args.seed, index), style, stats,
                                          strategy, choose_deal=args.choose_deal)
                finished += int(done)
            except grpc.aio.AioRpcError as error:
                stats.errors.append(f"{error.code().name} {error_reason(error)}: "
                                    f"{error.details()}")
            progress.game_done()

    work = asyncio.gather(*(one(i) for i in range(args.games)))
    ticker = asyncio.ensure_future(progress.tick())
    interrupted = False

    def stop() -> None:
        nonlocal interrupted
        interrupted = True
        work.cancel()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    try:
        await work
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        ticker.cancel()
    await conn.close()
    seconds = time.perf_counter() - started
    for line in stats.errors[:10]:
        print(f"error: {line}", file=sys.stderr)
    summary: dict[str, object] = {
        "kind": args.kind, "players": args.players, "games": args.games,
        "finished": finished, "errors": len(stats.errors),
        "actions": stats.actions, "refused": stats.refused,
        "rate_limited": stats.rate_limited, "idle_checks": stats.idle_checks,
        "seconds": round(seconds, 3),
        "actions_per_s": round(stats.actions / seconds, 1) if seconds else 0.0}
    if interrupted:
        summary["interrupted"] = True
    return summary


async def play(args: argparse.Namespace) -> dict[str, object]:
    conn = Connection(args.target, credentials=Credentials.from_options(args))
    await conn.reach()
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=args.game))).game
    request = pb.JoinGameRequest(game_id=args.game, display_name=args.name,
                                 request_id=uuid.uuid4().hex)
    if args.seat is not None:
        request.seat = args.seat
    joined = await conn.call(conn.stub.JoinGame, request)
    stats = Stats()
    rng = random.Random(args.seed)
    strategy = strategies.load(args.strategy) if args.strategy else strategies.reference(
        view.kind, rng)
    done = await play_seat(conn, args.game, joined.seat, joined.seat_token, strategy, rng,
                           BotStyle(args.reaction_ms, args.mistake_rate), stats)
    await conn.close()
    return {"game_id": args.game, "seat": joined.seat, "finished": done,
            "actions": stats.actions, "errors": len(stats.errors)}


def _add_globals(parser: argparse.ArgumentParser, suppress: bool) -> None:
    add_target(parser, suppress)
    parser.add_argument("--reaction-ms", type=bounded(0, UINT32_MAX),
                        default=argparse.SUPPRESS if suppress else 0,
                        help="wait this many ms (±30%%) before each move sent (human-like, slow)")
    parser.add_argument("--mistake-rate", type=bounded_float(0, 1),
                        default=argparse.SUPPRESS if suppress else 0.0,
                        help="chance of a random legal move instead of the policy's")
    parser.add_argument("--strategy", default=argparse.SUPPRESS if suppress else "",
                        help="module:function (view, legal_actions) -> action to play with "
                             "(default: the reference bot)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; what checks.bot_options_problem refuses is the subcommand's one-line
    error (exit status 2), before any call. selfplay's --players 0 is the game's fewest."""
    parser, commands = _parsers()
    args = parser.parse_args(argv)
    problem = checks.bot_options_problem(args)
    if problem:
        commands[args.command].error(problem)
    if args.command == "selfplay":
        args.players = args.players or games.by_command(args.kind).seats[0]
    return args


def build_parser() -> argparse.ArgumentParser:
    """`tapis-bot`'s parser: every number is checked against its range up front (the contract's
    field, else the bound its help gives)."""
    return _parsers()[0]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """`tapis-bot`'s parser, and each subcommand's by its name (whose errors name it)."""
    parser = argparse.ArgumentParser(prog="tapis-bot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_globals(parser, False)
    common = global_parent(_add_globals)
    sub = parser.add_subparsers(dest="command", required=True)
    p_play = sub.add_parser("play", help="take a seat in a game and play it", parents=[common])
    p_play.add_argument("--game", required=True)
    p_play.add_argument("--seat", type=bounded(0, UINT32_MAX))
    p_play.add_argument("--name", default="tapis-bot")
    p_play.add_argument("--seed", type=bounded(0, UINT64_MAX), default=0)
    p_self = sub.add_parser("selfplay", help="create games and fill every seat with bots",
                            parents=[common])
    p_self.add_argument("--kind", choices=sorted(games.KINDS), default="war")
    p_self.add_argument("--games", type=bounded(1, MAX_SELFPLAY_GAMES), default=10,
                        help=f"games to play (at most {MAX_SELFPLAY_GAMES:,})")
    p_self.add_argument("--players", type=bounded(0, MAX_PLAYERS), default=0, metavar="N",
                        help="seats at each table (default: the fewest the game seats)")
    p_self.add_argument("--concurrency", type=bounded(1, MAX_SELFPLAY_GAMES), default=16,
                        help="games played at once")
    p_self.add_argument("--seed", type=bounded(0, UINT64_MAX), default=1)
    p_self.add_argument("--progress-every", type=bounded(0, MAX_SELFPLAY_GAMES), default=0,
                        help="a progress line on stderr every N games done (default: a tenth "
                             "of --games), and every 5 s")
    p_self.add_argument("--choose-deal", action="store_true",
                        help="send --seed as the games' seeds (the server must run with "
                             "--allow-stacked-decks)")
    return parser, {"play": p_play, "selfplay": p_self}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    runner = selfplay if args.command == "selfplay" else play
    try:
        result = asyncio.run(runner(args))
    except Unreachable as error:
        print(f"tapis-bot: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    except grpc.aio.AioRpcError as error:
        print(f"tapis-bot: {error.code().name} {error_reason(error)}: {error.details()}",
              file=sys.stderr)
        raise SystemExit(1) from error
    except KeyboardInterrupt:  # Ctrl-C before the games began, or in `play`
        raise SystemExit(130) from None
    except ValueError as error:  # a bad --strategy
        print(f"tapis-bot: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    print(json.dumps(result))
    if result.get("interrupted"):
        raise SystemExit(130)
    if result.get("errors"):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
