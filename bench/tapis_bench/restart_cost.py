"""What a restart costs (issue 32's figures): a server on SQLite restarted right after N War
tables finished (its resident memory against an empty server's, and its time to ready), and one
restarted on N live tables (how soon ``liveness`` answers, and the longest silence until ready).

    python -m tapis_bench.restart_cost --finished 5000 --live 6000

Each server is a real ``tapis-server`` process on its own data directory; liveness is the health
service's ``liveness``, readiness its overall status. The figures depend on the host's load,
which the last line records with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_bench.procs import free_port, progress

OPEN = ["--create-rate", "0", "--keyless-create-rate", "0", "--keyless-address-share", "0",
        "--keyless-max-tables", "0", "--list-rate", "0", "--bot-delay-ms", "0"]
"""No limit stands between the bench and the tables it makes."""


def start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    server = Path(sys.executable).with_name("tapis-server")
    return subprocess.Popen([str(server), "--port", str(port), "--data-dir", str(data_dir),
                             *OPEN], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def watch(port: int, started: float, until_ready_s: float = 120.0) -> dict[str, float]:
    """Poll ``liveness`` (every 50 ms, each with a 0.5 s deadline) and readiness from the
    process start until ready: the first answer, the longest gap between answers, ready."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    health = health_pb2_grpc.HealthStub(channel)
    first = last = None
    gap = 0.0
    try:
        while time.monotonic() - started < until_ready_s:
            try:
                answer = await health.Check(health_pb2.HealthCheckRequest(service="liveness"),
                                            timeout=0.5)
                now = time.monotonic() - started
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    if first is None:
                        first = now
                    elif last is not None:
                        gap = max(gap, now - last)
                    last = now
                ready = await health.Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                if ready.status == health_pb2.HealthCheckResponse.SERVING:
                    return {"first_liveness_s": round(first or now, 3),
                            "longest_silence_s": round(gap, 3), "ready_s": round(now, 3)}
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError("not ready in time")
    finally:
        await channel.close()


async def make_tables(port: int, count: int, finished: bool) -> None:
    """``count`` War tables: two bots playing to one point (``finished``), or two person seats
    nobody joined (live)."""
    seat = pb.SEAT_TYPE_BOT if finished else pb.SEAT_TYPE_PERSON
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)
        request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                       seat_configs=[pb.SeatConfig(type=seat)] * 2,
                                       war=war_pb2.WarOptions(target_points=1))
        for start_at in range(0, count, 100):
            await asyncio.gather(*(stub.CreateGame(request)
                                   for _ in range(min(100, count - start_at))))
        while finished:
            over = 0
            token = ""
            while True:
                page = await stub.ListGames(pb.ListGamesRequest(
                    include_finished=True, page_size=1000, page_token=token))
                over += sum(line.status != pb.GAME_STATUS_IN_PROGRESS for line in page.games)
                token = page.next_page_token
                if not token:
                    break
            if over >= count:
                return
            await asyncio.sleep(0.5)


async def ready_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], int, dict[str, float]]:
    port = free_port()
    started = time.monotonic()
    process = start(data_dir, port)
    return process, port, await watch(port, started)


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    process.send_signal(sig)
    process.wait(timeout=60)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"load_avg": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        empty, _, timing = await ready_server(root / "empty")
        await asyncio.sleep(1)
        result["empty"] = {**timing, "rss_mib": round(rss_mib(empty.pid), 1)}
        stop(empty)
        if args.finished:
            progress(f"{args.finished} War tables played to their end")
            server, port, _ = await ready_server(root / "finished")
            await make_tables(port, args.finished, finished=True)
            stop(server)
            again, _, timing = await ready_server(root / "finished")
            await asyncio.sleep(1)
            result["finished"] = {"tables": args.finished, **timing,
                                  "rss_mib": round(rss_mib(again.pid), 1)}
            result["finished"]["rss_over_empty_mib"] = round(
                result["finished"]["rss_mib"] - result["empty"]["rss_mib"], 1)
            stop(again)
        if args.live:
            progress(f"{args.live} live War tables, then SIGKILL and a restart")
            server, port, _ = await ready_server(root / "live")
            await make_tables(port, args.live, finished=False)
            stop(server, signal.SIGKILL)
            again, _, timing = await ready_server(root / "live")
            result["live"] = {"tables": args.live, **timing}
            stop(again)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finished", type=int, default=5000)
    parser.add_argument("--live", type=int, default=6000)
    result = asyncio.run(main_async(parser.parse_args()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
