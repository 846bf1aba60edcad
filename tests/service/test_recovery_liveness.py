"""Recovery never silences liveness: while a store of many tables is read and replayed, the
event loop keeps turning (the waiting room's health service answers), and a call caught when
the room hands the port to the real server is answered ``SERVER_STARTING``, never
``CANCELLED`` (startup.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_engine.registry import GAMES
from tapis_service.observe.clock import ManualClock
from tapis_service.process import startup
from tapis_service.process.health import LIVENESS, SERVING, new_health
from tapis_service.process.startup import WaitingRoom
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import YIELD_EVERY
from tapis_service.tables.host import GameHost
from tests.support.calls import reason_of
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of

TABLES = 8 * YIELD_EVERY


async def _store_of_live_tables(path: Path, count: int) -> None:
    host = GameHost(TEST_SETTINGS, ManualClock(), SqliteStore(path, synchronous="OFF"))
    rules = GAMES["war"]
    for _ in range(count):
        session = await host.create(kind="war", seats=2, seed=None, turn_time_ms=0,
                                    bots=[None, None], options=rules.default_options(),
                                    stacked_deck=None, stacked_first=None)
        for seat in range(2):
            await host.join(session.game_id, seat, f"p{seat}")
    await host.close()


async def test_recovery_of_many_tables_lets_health_checks_in(tmp_path: Path) -> None:
    await _store_of_live_tables(tmp_path, TABLES)
    host = GameHost(TEST_SETTINGS, ManualClock(), SqliteStore(tmp_path, synchronous="OFF"))
    health = await new_health(ready=False)
    answered = 0
    recovering = asyncio.ensure_future(host.recover())

    async def liveness_checks() -> None:  # as the waiting room serves them, on the same loop
        nonlocal answered
        while not recovering.done():
            answer = await health.Check(health_pb2.HealthCheckRequest(service=LIVENESS),
                                        None)
            assert answer is not None and answer.status == SERVING
            answered += 1
            await asyncio.sleep(0)

    await asyncio.gather(recovering, liveness_checks())
    assert len(live_of(host)) == TABLES
    # read, restored and armed: each a turn of the loop every YIELD_EVERY tables at least
    assert answered >= 3 * TABLES // YIELD_EVERY
    await host.close()


async def test_a_call_caught_at_the_hand_over_is_answered_server_starting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    refuse = startup._refuse_starting

    async def held(request: bytes, context: grpc.aio.ServicerContext) -> None:
        entered.set()  # in flight in the room when it hands the port over
        await release.wait()
        await refuse(request, context)

    monkeypatch.setattr(startup, "_refuse_starting", held)
    port = free_port()
    room = await WaitingRoom.open(replace(TEST_SETTINGS, port=port))
    assert room is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = pb_grpc.GameServiceStub(channel).CreateGame(pb.CreateGameRequest(), timeout=30)
        await entered.wait()
        closing = asyncio.ensure_future(room.close())
        while room.server is not None:
            await asyncio.sleep(0)
        for _ in range(20):  # the stop is under way (a stop without grace cancels here)
            await asyncio.sleep(0)
        release.set()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        await closing
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(refused.value) == "SERVER_STARTING"
