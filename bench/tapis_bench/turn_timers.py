"""Do turn timers always fire? (issue 32's check, against a real server on SQLite.)

For every game of the contract, ``--tables`` tables of two person seats under a turn limit
(``--limit-ms``, 3 s by default); at table i the people make i % 4 moves (a seeded choice among
their legal actions), then walk away. Each table must then move (the server's bot playing the
timed-out seat) within ``--within-ms`` of its earliest deadline.

    python -m tapis_bench.turn_timers --tables 20

The last line is a JSON object: per game, the tables, how many moved in time, the latest move
after its deadline (ms), and the stuck ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_bench.procs import free_port, progress, wait_ready
from tapis_bench.restart_cost import start


def auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def table(stub: pb_grpc.GameServiceStub, kind: pb.GameKind.ValueType, moves: int,
                limit_ms: int, rng: random.Random) -> tuple[str, float | None, int]:
    """A table of two people who make ``moves`` moves, then idle: (its id, its earliest
    deadline as wall seconds (None: none), its version then)."""
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=kind, seats=2, turn_time_limit_ms=limit_ms,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.game.game_id
    tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in (0, 1)]
    for _ in range(moves):
        for token in tokens:
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=auth(token))).game
            if view.legal_actions:
                await stub.SubmitAction(pb.SubmitActionRequest(
                    game_id=game_id, action=rng.choice(list(view.legal_actions)),
                    expected_version=view.version), metadata=auth(token))
                break
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    deadlines = [d.expire_time.ToMilliseconds() / 1000 for d in view.deadlines]
    return game_id, min(deadlines) if deadlines else None, view.version


async def watch(stub: pb_grpc.GameServiceStub, game_id: str, deadline: float, version: int,
                within_s: float) -> float | None:
    """Seconds after ``deadline`` at which the table moved past ``version`` (None: not within
    ``within_s``)."""
    while time.time() < deadline + within_s:
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        if view.version > version:
            return time.time() - deadline
        await asyncio.sleep(0.1)
    return None


async def run(port: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    result: dict[str, Any] = {"load_avg": round(os.getloadavg()[0], 2)}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)
        for kind in pb.GameKind.values():
            if kind == pb.GAME_KIND_UNSPECIFIED:
                continue
            name = pb.GameKind.Name(kind)
            progress(f"{name}: {args.tables} tables")
            made = await asyncio.gather(*(table(stub, kind, i % 4, args.limit_ms, rng)
                                          for i in range(args.tables)))
            timed = [(g, d, v) for g, d, v in made if d is not None]
            lags = await asyncio.gather(*(watch(stub, g, d, v, args.within_ms / 1000)
                                          for g, d, v in timed))
            moved = [lag for lag in lags if lag is not None]
            result[name] = {"tables": len(made), "timed": len(timed), "moved": len(moved),
                            "latest_after_deadline_ms": round(max(moved, default=0) * 1000),
                            "stuck": [g for (g, _, _), lag in zip(timed, lags, strict=True)
                                      if lag is None]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=20, help="tables per game")
    parser.add_argument("--limit-ms", type=int, default=3000)
    parser.add_argument("--within-ms", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=32)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = start(Path(data_dir), port)
        try:
            wait_ready(port, server)
            result = asyncio.run(run(port, args))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
