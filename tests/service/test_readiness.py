"""Readiness follows the store by itself: an idle server whose store refuses writes goes
NOT_SERVING at its next probe (no call had to fail first) and SERVING once the store commits
again; liveness stays SERVING throughout."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis_service.process.server import create_server
from tapis_service.stores.sqlite_store import SqliteStore
from tests.support.server import TEST_SETTINGS


async def test_an_idle_server_follows_its_store(tmp_path: Path) -> None:
    broken = asyncio.Event()

    async def failpoint(where: str) -> None:
        if where == "commit" and broken.is_set():
            raise sqlite3.OperationalError("database or disk is full")

    settings = replace(TEST_SETTINGS, store="sqlite", data_dir=tmp_path)
    running = await create_server(settings, store=SqliteStore(tmp_path, failpoint=failpoint),
                                  probe_every_s=0.05)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)

            async def status(service: str) -> int:
                answer = await health.Check(health_pb2.HealthCheckRequest(service=service))
                return answer.status

            async def until(service: str, wanted: int) -> None:
                async with asyncio.timeout(10):
                    while await status(service) != wanted:
                        await asyncio.sleep(0.02)

            serving, not_serving = (health_pb2.HealthCheckResponse.SERVING,
                                    health_pb2.HealthCheckResponse.NOT_SERVING)
            await until("", serving)
            broken.set()  # nobody calls: only the probe can notice
            await until("", not_serving)
            assert await status("tapis.v1.GameService") == not_serving
            assert await status("liveness") == serving
            broken.clear()
            await until("", serving)
            assert await status("tapis.v1.GameService") == serving
    finally:
        await running.stop(0)
