"""What a stranger's refused calls cost a keyed server (issue 36; figures, not asserts).

    .venv/bin/python -m tapis_bench.refusals [--calls 2000] [--concurrency 32]

Run from the repository's root (it uses ``tests.support.relay`` to call from other loopback
addresses: the host's own 127.0.0.1 is never cut). Two keyed server processes in the same run:
``budget``, with the default refusal budget, and ``no_budget`` (``--refusal-rate 0``: every
refused call answered, as before). On each, from 127.0.0.3, ``--calls`` served ``GetGame``
calls (with the key); then from 127.0.0.2, ``--calls`` keyless ``CreateGame`` calls
(``API_KEY_REQUIRED``), ``--concurrency`` at a time, each with a short deadline (past its
budget the address's connections are cut and its new ones dropped: its calls end at the
client). Reported: the server's CPU per call (from /proc) for each, and the calls' codes; the
refused calls' also less the server's idle CPU over the same time (measured first: the
housekeeping, the connection watch), since the cut calls cost it nothing but that. Then the
backend's rate (``CreateGame`` then ``GetGame``, one after the other, for ``--seconds``) alone,
and while a fresh stranger (127.0.0.4) floods keyless calls ``--concurrency`` at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_bench.limits import cpu_seconds
from tapis_bench.procs import free_port, wait_ready
from tests.support.relay import SourceRelay

KEY = "bench-refusals-key-0123456789"
STRANGER, BACKEND, FLOODER = "127.0.0.2", "127.0.0.3", "127.0.0.4"
IDLE_S = 3.0


async def calls(stub: pb_grpc.GameServiceStub, count: int, concurrency: int,
                one: Any) -> Counter[str]:
    codes: Counter[str] = Counter()
    queue = iter(range(count))

    async def worker() -> None:
        for _ in queue:
            try:
                await one(stub)
                codes["OK"] += 1
            except grpc.aio.AioRpcError as error:
                codes[error.code().name] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return codes


async def backend_rate(backend: pb_grpc.GameServiceStub, seconds: float) -> float:
    """Tables a backend creates (and reads once) per second."""
    keyed = (("x-api-key", KEY),)
    loop = asyncio.get_running_loop()
    done, until = 0, loop.time() + seconds
    while loop.time() < until:
        game = await backend.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR),
                                        metadata=keyed, timeout=5)
        await backend.GetGame(pb.GetGameRequest(game_id=game.game.game_id), metadata=keyed,
                              timeout=5)
        done += 1
    return done / seconds


async def flooded_rate(port: int, backend: pb_grpc.GameServiceStub, seconds: float,
                       concurrency: int) -> float:
    """The backend's rate while 127.0.0.4 floods keyless CreateGame calls."""
    create = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)
    stop = asyncio.Event()

    async def flood(stub: pb_grpc.GameServiceStub) -> None:
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):
                await stub.CreateGame(create, timeout=0.2)

    async with SourceRelay(FLOODER, "127.0.0.1", port) as far, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)
        flooders = [asyncio.create_task(flood(stub)) for _ in range(concurrency)]
        try:
            return await backend_rate(backend, seconds)
        finally:
            stop.set()
            await asyncio.gather(*flooders)


async def measure(port: int, pid: int, count: int, concurrency: int,
                  seconds: float) -> dict[str, Any]:
    keyed = (("x-api-key", KEY),)
    async with SourceRelay(BACKEND, "127.0.0.1", port) as near, \
            SourceRelay(STRANGER, "127.0.0.1", port) as far, \
            grpc.aio.insecure_channel(f"127.0.0.1:{near.port}") as backend_channel, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as stranger_channel:
        backend = pb_grpc.GameServiceStub(backend_channel)
        game_id = (await backend.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR),
                                            metadata=keyed)).game.game_id
        request = pb.GetGameRequest(game_id=game_id)
        before = cpu_seconds(pid)
        await asyncio.sleep(IDLE_S)
        idle_per_s = (cpu_seconds(pid) - before) / IDLE_S
        before = cpu_seconds(pid)
        served = await calls(backend, count, concurrency,
                             lambda stub: stub.GetGame(request, metadata=keyed, timeout=5))
        served_ms = (cpu_seconds(pid) - before) * 1000 / count
        create = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)
        before, started = cpu_seconds(pid), time.monotonic()
        refused = await calls(pb_grpc.GameServiceStub(stranger_channel), count, concurrency,
                              lambda stub: stub.CreateGame(create, timeout=0.2))
        spent = cpu_seconds(pid) - before
        refused_ms = spent * 1000 / count
        beyond_idle_ms = max(0.0, spent - idle_per_s * (time.monotonic() - started)) * 1000 / count
        alone = await backend_rate(backend, seconds)
        flooded = await flooded_rate(port, backend, seconds, concurrency)
    return {"served_get_game": {"codes": dict(served),
                                "server_cpu_us_per_call": round(served_ms * 1000, 1)},
            "refused_keyless_create": {
                "codes": dict(refused), "server_cpu_us_per_call": round(refused_ms * 1000, 1),
                "beyond_idle_us_per_call": round(beyond_idle_ms * 1000, 1)},
            "idle_server_cpu_ms_per_s": round(idle_per_s * 1000, 1),
            "backend_tables_per_s": {"alone": round(alone, 1), "flooded": round(flooded, 1),
                                     "kept": round(flooded / alone, 3)},
            "refused_per_served": round(refused_ms / served_ms, 3),
            "beyond_idle_refused_per_served": round(beyond_idle_ms / served_ms, 3)}


async def run(arguments: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        keys = Path(folder) / "keys"
        keys.write_text(f"{KEY} bench\n")
        for name, extra in (("no_budget", ["--refusal-rate", "0"]), ("budget", [])):
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "tapis_service.process.main", "--port", str(port),
                 "--store", "memory", "--api-keys-file", str(keys), "--create-rate", "0",
                 "--backend-create-rate", "0",
                 "--log-level", "warning", *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_ready(port, process)
                results[name] = await measure(port, process.pid, arguments.calls,
                                              arguments.concurrency, arguments.seconds)
            finally:
                process.kill()
                process.wait()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
