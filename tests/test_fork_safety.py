"""A process running gRPC can fork: the tests (and the benchmarks) restart the embedded
PostgreSQL, whose ``pg_ctl`` runs as PostgreSQL's own user and so is forked, not spawned, while
calls are in flight. gRPC's fork handlers crashed such children (SIGSEGV in 20-45 % of forks
on this project's CI host, measured with ``preexec_fn``), so ``tests/conftest.py`` and
``tapis_bench`` turn them off (``GRPC_ENABLE_FORK_SUPPORT=false``) before gRPC is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess

import grpc

FORKS = 200


def _forked_true() -> int:
    # a preexec_fn makes subprocess fork (as setting a user does) instead of vfork/posix_spawn
    return subprocess.run(["true"], preexec_fn=lambda: None, check=False).returncode


async def test_children_forked_while_calls_are_in_flight_run() -> None:
    assert os.environ["GRPC_ENABLE_FORK_SUPPORT"] == "false"
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stop = asyncio.Event()

    async def calling() -> None:  # unknown method: each call is a full round trip
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):
                await channel.unary_unary("/tapis.Nowhere/Call")(b"", timeout=5)

    callers = [asyncio.ensure_future(calling()) for _ in range(8)]
    try:
        codes = [await asyncio.to_thread(_forked_true) for _ in range(FORKS)]
    finally:
        stop.set()
        await asyncio.gather(*callers)
        await channel.close()
        await server.stop(None)
    assert codes == [0] * FORKS
