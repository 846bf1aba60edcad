"""Undecodable request bytes answer INVALID_ARGUMENT / INVALID_REQUEST, never UNKNOWN; the bound
on calls in flight answers RESOURCE_EXHAUSTED / OVERLOADED."""

from __future__ import annotations

import asyncio
import random

import grpc
from grpc_health.v1 import health_pb2

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.store import MemoryStore
from tests.support.calls import reason_of, refusal, view_of, war_for_two
from tests.support.raw import HEALTH, JUNK, METHODS, raw_call
from tests.support.server import Harness, ServerFactory


async def test_undecodable_bytes_to_every_method_are_invalid_requests(server: Harness) -> None:
    game_id, _ = await war_for_two(server)
    before = await view_of(server, game_id)
    for method in [*METHODS, HEALTH]:
        streaming = method.endswith("StreamEvents")
        for payload in JUNK:
            error = await raw_call(server.channel, method, payload, streaming)
            assert error is not None, (method, payload)
            assert (error.code(), reason_of(error)) == (
                grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"), (method, payload)
            assert "class" not in (error.details() or "")
    assert (await view_of(server, game_id)).version == before.version


async def test_random_bytes_to_every_method_never_give_unknown(server: Harness) -> None:
    rng = random.Random(10)
    game_id, _ = await war_for_two(server)
    before = await view_of(server, game_id)
    codes: set[grpc.StatusCode] = set()
    for method in METHODS:
        for _ in range(60):
            payload = rng.randbytes(rng.randrange(0, 300))
            error = await raw_call(server.channel, method, payload,
                                   method.endswith("StreamEvents"))
            if error is not None:
                codes.add(error.code())
                assert error.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
    assert grpc.StatusCode.INVALID_ARGUMENT in codes
    assert (await view_of(server, game_id)).version == before.version
    health = await server.channel.unary_unary(
        HEALTH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString)(
            health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_undecodable_bytes_in_a_client_stream_are_invalid_requests(
        server: Harness) -> None:
    reflection = server.channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    call = reflection(iter([b"\x0f"]))
    try:
        async for _ in call:
            pass
        raise AssertionError("undecodable bytes were answered")
    except grpc.aio.AioRpcError as error:
        assert (error.code(), reason_of(error)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                    "INVALID_REQUEST")


class HeldStore(MemoryStore):
    """Creates wait until released: a call held in flight on command."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    def created(self, game_id: str, record: dict[str, object]) -> asyncio.Future[None]:
        async def wait() -> None:
            self.waiting.set()
            await self.release.wait()

        return asyncio.ensure_future(wait())


async def test_calls_beyond_the_bound_in_flight_are_refused_as_overloaded(
        make_server: ServerFactory) -> None:
    store = HeldStore()
    h = await make_server(clock=ManualClock(), store=store, max_in_flight=1)
    held = asyncio.ensure_future(h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)))
    await store.waiting.wait()
    code, reason, details = await refusal(h.stub.ListGames(pb.ListGamesRequest()))
    assert (code, reason) == ("RESOURCE_EXHAUSTED", "OVERLOADED")
    assert "retry" in details
    store.release.set()
    assert (await held).game.game_id
    assert (await h.stub.ListGames(pb.ListGamesRequest())).games  # the bound is free again
    assert h.running.guard is not None and h.running.guard.in_flight == 0
