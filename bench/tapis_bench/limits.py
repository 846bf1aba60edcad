"""Measure the limits against a real `tapis-server` process (not a test: figures, not asserts).

    .venv/bin/python -m tapis_bench.limits [--requests 20] [--concurrent 2000]

1. ``huge_deck``: a CreateGame with a 3.9 MB ``stacked_deck`` on a server without
   --allow-stacked-decks: the server's CPU time per request (from /proc), and the answer.
2. ``largest_deck``: the same with the largest deck that fits the message bound (64 KiB).
3. ``concurrent``: ``--concurrent`` GetGame calls (``--method create``: CreateGame, which waits
   for its commit on a durable server) at once over ``--channels`` connections, with a deadline
   of ``--deadline-s``: how many end with each status code.

``--server-module`` picks the server to measure (another checkout on PYTHONPATH: a baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import grpc

from tapis.v1 import cards_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_bench.procs import free_port

ACE = cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def refused_cpu(stub: pb_grpc.GameServiceStub, pid: int, request: pb.CreateGameRequest,
                      count: int) -> dict[str, Any]:
    codes: Counter[str] = Counter()
    before = cpu_seconds(pid)
    started = time.perf_counter()
    for _ in range(count):
        try:
            await stub.CreateGame(request)
            codes["OK"] += 1
        except grpc.aio.AioRpcError as error:
            codes[error.code().name] += 1
            details = error.details()
    wall = time.perf_counter() - started
    return {"bytes": request.ByteSize(), "codes": dict(codes), "details": details,
            "server_cpu_ms_per_request": round((cpu_seconds(pid) - before) * 1000 / count, 2),
            "client_wall_ms_per_request": round(wall * 1000 / count, 2)}


async def concurrent(target: str, game_id: str, calls: int, channels: int, deadline_s: float,
                     method: str = "get") -> dict[str, Any]:
    opened = [grpc.aio.insecure_channel(target, options=[
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.max_send_message_length", 8 * 1024 * 1024)]) for _ in range(channels)]
    stubs = [pb_grpc.GameServiceStub(c) for c in opened]
    request = pb.GetGameRequest(game_id=game_id)
    codes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    async def one(i: int) -> None:
        try:
            stub = stubs[i % channels]
            if method == "create":
                await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR),
                                      timeout=deadline_s)
            else:
                await stub.GetGame(request, timeout=deadline_s)
            codes["OK"] += 1
        except grpc.aio.AioRpcError as error:
            codes[error.code().name] += 1
            reasons[f"{error.code().name}: {error.details()}"] += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    seconds = time.perf_counter() - started
    for channel in opened:
        await channel.close()
    return {"calls": calls, "channels": channels, "deadline_s": deadline_s,
            "codes": dict(codes), "details": dict(reasons.most_common(4)),
            "seconds": round(seconds, 2)}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", args.server_module, "--port", str(port),
                               "--log-level", "error", *args.server_args])
    target = f"127.0.0.1:{port}"
    try:
        channel = grpc.aio.insecure_channel(target, options=[
            ("grpc.max_send_message_length", 8 * 1024 * 1024)])
        await asyncio.wait_for(channel.channel_ready(), 30)
        stub = pb_grpc.GameServiceStub(channel)
        created = await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
        huge = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, stacked_deck=[ACE] * 650_000)
        largest = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, stacked_deck=[ACE] * 10_500)
        results = {
            "huge_deck": await refused_cpu(stub, server.pid, huge, args.requests),
            "largest_deck": await refused_cpu(stub, server.pid, largest, args.requests * 10),
        }
        await channel.close()
        results["concurrent"] = await concurrent(target, created.game.game_id,
                                                 args.concurrent, args.channels,
                                                 args.deadline_s, args.method)
        return results
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=2000)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--deadline-s", type=float, default=10.0)
    parser.add_argument("--method", choices=("get", "create"), default="get")
    parser.add_argument("--server-module", default="tapis_service.process.main")
    parser.add_argument("server_args", nargs="*", help="after --: the server's own flags")
    print(json.dumps(asyncio.run(measure(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
