"""`tapis-bot`: a bot that plays any Tapis game through the public API.

    tapis-bot play --game GAME_ID [--seat N]         take a seat and play it to the end
    tapis-bot selfplay --kind war --games 50         create games, fill every seat with bots

It only uses the tapis.v1 contract: it follows its event stream, and when the game awaits its
seat (or the game says an event is worth a look, e.g. a card flipped in Bataille Corse) it reads
its view and picks one of the legal actions the server lists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
from dataclasses import dataclass, field

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games
from tapis_clients.connection import DEFAULT_TARGET, Connection, error_reason

NORMAL_REFUSALS = {"STALE_VERSION", "SLAP_TOO_LATE", "NOT_YOUR_TURN", "RATE_LIMITED",
                   "GAME_OVER", "NOT_ALLOWED_NOW"}
"""Refusals a real-time bot meets in a fair race: the table moved before its action landed."""


@dataclass
class Stats:
    actions: int = 0
    refused: int = 0
    idle_checks: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class BotStyle:
    reaction_ms: int = 0
    mistake_rate: float = 0.0


IDLE_CHECK_S = 3.0
"""With no event for this long, the bot looks at the table itself (an event or an answer may
have been lost with a server that crashed)."""


async def play_seat(conn: Connection, game_id: str, seat: int, token: str, kind: int,
                    rng: random.Random, style: BotStyle, stats: Stats) -> bool:
    """Play ``seat`` until the game in play ends; True when it ended."""
    acted_at = -1
    started = False
    inbox: asyncio.Queue[pb.Event | None] = asyncio.Queue()

    async def follow() -> None:
        try:
            async for event in conn.events(game_id, 0, token):
                inbox.put_nowait(event)
        finally:
            inbox.put_nowait(None)

    async def act() -> bool | None:
        """Move if the game awaits a move of ours; True when the game is over. A move refused
        because the table moved on is tried again on the fresh table."""
        nonlocal acted_at
        for _ in range(5):
            view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=game_id),
                                    token)).game
            if view.status == pb.GAME_STATUS_GAME_OVER and started:
                return True
            if rng.random() < style.mistake_rate and view.legal_actions:
                action: pb.Action | None = rng.choice(list(view.legal_actions))
            else:
                action = games.choose(kind, view, rng)
            if action is None or action.WhichOneof("action") == "start_next_game":
                return None
            request = pb.SubmitActionRequest(game_id=game_id, action=action,
                                             request_id=uuid.uuid4().hex,
                                             expected_version=view.version)
            try:
                response = await conn.call(conn.stub.SubmitAction, request, token)
            except grpc.aio.AioRpcError as error:
                reason = error_reason(error)
                if error.code() in (grpc.StatusCode.ABORTED,
                                    grpc.StatusCode.RESOURCE_EXHAUSTED) \
                        or reason in NORMAL_REFUSALS:
                    stats.refused += 1
                    continue
                stats.errors.append(f"{error.code().name} {reason}: {error.details()}")
                return None
            acted_at = response.version - 1
            stats.actions += 1
            return None
        return None

    follower = asyncio.ensure_future(follow())
    try:
        while True:
            try:
                event = await asyncio.wait_for(inbox.get(), IDLE_CHECK_S)
            except TimeoutError:
                stats.idle_checks += 1
                if await act():
                    return True
                continue
            if event is None:
                await follower  # raises what ended the stream, if anything did
                return False
            body = event.WhichOneof("body")
            if body == "game_started":
                started = True
            if body == "game_ended" and started:
                return True
            mine = seat in event.awaiting_seats and event.version > acted_at
            if not (mine or (games.reacts_to(kind, event, seat) and event.version > acted_at)):
                continue
            if style.reaction_ms:
                jitter = rng.uniform(0.7, 1.3)
                await asyncio.sleep(style.reaction_ms * jitter / 1000)
            if await act():
                return True
    finally:
        follower.cancel()


async def selfplay_one(conn: Connection, kind: pb.GameKind.ValueType, players: int, seed: int,
                       style: BotStyle, stats: Stats, choose_deal: bool = False) -> bool:
    request = pb.CreateGameRequest(kind=kind, seats=players, request_id=uuid.uuid4().hex)
    if choose_deal:  # only a server started with --allow-stacked-decks accepts a chosen seed
        request.seed = seed
    created = await conn.call(conn.stub.CreateGame, request)
    game_id = created.game.game_id
    seats = []
    for _ in range(players):
        joined = await conn.call(conn.stub.JoinGame, pb.JoinGameRequest(
            game_id=game_id, display_name="tapis-bot", request_id=uuid.uuid4().hex))
        seats.append((joined.seat, joined.seat_token))
    rng = random.Random(seed)
    results = await asyncio.gather(*(
        play_seat(conn, game_id, seat, token, kind, random.Random(rng.random()), style, stats)
        for seat, token in seats))
    return all(results)


async def selfplay(args: argparse.Namespace) -> dict[str, object]:
    kind = games.KINDS[args.kind]
    conn = Connection(args.target)
    stats = Stats()
    style = BotStyle(args.reaction_ms, args.mistake_rate)
    finished = 0
    failed = 0
    started = time.perf_counter()
    limit = asyncio.Semaphore(args.concurrency)
    from rich.progress import Progress

    with Progress(console=_stderr_console(), transient=False,
                  disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task(f"{args.kind} ×{args.players}", total=args.games)

        async def one(index: int) -> None:
            nonlocal finished, failed
            async with limit:
                try:
                    done = await selfplay_one(conn, kind, args.players,
                                              args.seed * 1_000_003 + index, style, stats,
                                              args.choose_deal)
                    finished += int(done)
                except grpc.aio.AioRpcError as error:
                    failed += 1
                    stats.errors.append(f"{error.code().name} {error_reason(error)}: "
                                        f"{error.details()}")
                progress.advance(task)

        await asyncio.gather(*(one(i) for i in range(args.games)))
    await conn.close()
    seconds = time.perf_counter() - started
    for line in stats.errors[:10]:
        print(f"error: {line}", file=sys.stderr)
    return {"kind": args.kind, "players": args.players, "games": args.games,
            "finished": finished, "errors": len(stats.errors) + failed,
            "actions": stats.actions, "refused": stats.refused,
            "idle_checks": stats.idle_checks,
            "seconds": round(seconds, 3),
            "actions_per_s": round(stats.actions / seconds, 1) if seconds else 0.0}


async def play(args: argparse.Namespace) -> dict[str, object]:
    conn = Connection(args.target)
    view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=args.game))).game
    request = pb.JoinGameRequest(game_id=args.game, display_name=args.name,
                                 request_id=uuid.uuid4().hex)
    if args.seat is not None:
        request.seat = args.seat
    joined = await conn.call(conn.stub.JoinGame, request)
    stats = Stats()
    done = await play_seat(conn, args.game, joined.seat, joined.seat_token, view.kind,
                           random.Random(args.seed), BotStyle(args.reaction_ms,
                                                              args.mistake_rate), stats)
    await conn.close()
    return {"game_id": args.game, "seat": joined.seat, "finished": done,
            "actions": stats.actions, "errors": len(stats.errors)}


def _stderr_console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tapis-bot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default=DEFAULT_TARGET, help="server HOST:PORT")
    parser.add_argument("--reaction-ms", type=int, default=0,
                        help="think this long (±30%%) before each move")
    parser.add_argument("--mistake-rate", type=float, default=0.0,
                        help="chance of a random legal move instead of the policy's")
    sub = parser.add_subparsers(dest="command", required=True)
    p_play = sub.add_parser("play", help="take a seat in a game and play it")
    p_play.add_argument("--game", required=True)
    p_play.add_argument("--seat", type=int)
    p_play.add_argument("--name", default="tapis-bot")
    p_play.add_argument("--seed", type=int, default=0)
    p_self = sub.add_parser("selfplay", help="create games and fill every seat with bots")
    p_self.add_argument("--kind", choices=sorted(games.KINDS), default="war")
    p_self.add_argument("--games", type=int, default=10)
    p_self.add_argument("--players", type=int, default=2)
    p_self.add_argument("--concurrency", type=int, default=16)
    p_self.add_argument("--seed", type=int, default=1)
    p_self.add_argument("--choose-deal", action="store_true",
                        help="send --seed as the games' seeds (the server must run with "
                             "--allow-stacked-decks)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    runner = selfplay if args.command == "selfplay" else play
    try:
        result = asyncio.run(runner(args))
    except grpc.aio.AioRpcError as error:
        print(f"tapis-bot: {error.code().name} {error_reason(error)}: {error.details()}",
              file=sys.stderr)
        raise SystemExit(1) from error
    print(json.dumps(result))
    if result.get("errors"):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
