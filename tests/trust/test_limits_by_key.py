"""Limits that do not multiply with addresses: keyless creates, joins and listings share
server-wide buckets whatever address they come from; a backend's creates have their own.
Driven through GameApi with a Caller per source address (a transport cannot fake 200 source
addresses on loopback) on a manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.caller import Caller
from tapis_service.game_api import GameApi
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tests.support.calls import auth
from tests.support.server import ServerFactory
from tests.trust.door import KEY_A, KEY_B, door

ADDRESSES = [f"ipv4:10.0.{n // 250}.{n % 250 + 1}:40000" for n in range(200)]


def request() -> pb.CreateGameRequest:
    return pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2)


async def flood(api: GameApi, clock: ManualClock, seconds: int,
                backend_key: str | None = None) -> tuple[int, int, set[str]]:
    """Every address tries a keyless create every 500 ms (and a backend once per tick):
    (keyless tables created, backend tables created, the keyless refusals' reasons)."""
    created = backend_created = 0
    reasons: set[str] = set()
    for _ in range(seconds * 2):
        for peer in ADDRESSES:
            try:
                await api.create_game(request(), Caller(peer=peer))
                created += 1
            except ServiceError as error:
                reasons.add(error.reason)
        if backend_key is not None:
            await api.create_game(request(), Caller(peer=ADDRESSES[0], api_key=backend_key))
            backend_created += 1
        clock.advance(500)
    return created, backend_created, reasons


async def test_200_addresses_create_at_most_the_server_wide_cap(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    harness = await make_server(clock=clock)
    api = harness.running.api
    assert api is not None
    created, _, reasons = await flood(api, clock, seconds=10)
    assert 200 + 50 * 9 <= created <= 200 + 50 * 10
    assert reasons == {"RATE_LIMITED"}


async def test_a_backend_creates_during_a_keyless_flood(
        tmp_path: Path, make_server: ServerFactory) -> None:
    clock = ManualClock()
    files = door(tmp_path)
    harness = await make_server(clock=clock, api_keys_file=files.keys)
    api = harness.running.api
    assert api is not None
    created, backend_created, reasons = await flood(api, clock, seconds=2,
                                                    backend_key=KEY_A)
    assert created == 0 and reasons == {"API_KEY_REQUIRED"}
    assert backend_created == 4


async def test_a_backend_has_a_create_quota_of_its_own(
        tmp_path: Path, make_server: ServerFactory) -> None:
    clock = ManualClock()
    harness = await make_server(clock=clock, api_keys_file=door(tmp_path).keys,
                                backend_create_rate_per_s=1.0, backend_create_burst=2)
    api = harness.running.api
    assert api is not None
    caller = Caller(peer=ADDRESSES[0], api_key=KEY_A)
    for _ in range(2):
        await api.create_game(request(), caller)
    with pytest.raises(ServiceError) as raised:
        await api.create_game(request(), caller)
    assert raised.value.reason == "RATE_LIMITED"


async def test_keyless_joins_and_listings_share_one_rate(make_server: ServerFactory) -> None:
    clock = ManualClock()
    harness = await make_server(clock=clock, join_rate_per_s=1.0, join_burst=2,
                                list_rate_per_s=1.0, list_burst=2)
    api = harness.running.api
    assert api is not None
    games = [(await api.create_game(request(), Caller(peer=peer))).game.game_id
             for peer in ADDRESSES[:3]]
    outcomes = []
    for game_id, peer in zip(games, ADDRESSES, strict=False):
        try:
            await api.join_game(pb.JoinGameRequest(game_id=game_id), Caller(peer=peer))
            outcomes.append("joined")
        except ServiceError as error:
            outcomes.append(error.reason)
    assert outcomes == ["joined", "joined", "RATE_LIMITED"]
    listed = []
    for peer in ADDRESSES[:3]:
        try:
            await api.list_games(pb.ListGamesRequest(), Caller(peer=peer))
            listed.append("listed")
        except ServiceError as error:
            listed.append(error.reason)
    assert listed == ["listed", "listed", "RATE_LIMITED"]


async def test_tables_held_without_a_key_are_capped_and_a_backend_still_creates(
        tmp_path: Path, make_server: ServerFactory) -> None:
    clock = ManualClock()
    harness = await make_server(clock=clock, keyless_max_tables=3, backend_max_tables=2,
                                keyless_create_rate_per_s=0, create_rate_per_s=0)
    api = harness.running.api
    assert api is not None
    for peer in ADDRESSES[:3]:
        await api.create_game(request(), Caller(peer=peer))
    with pytest.raises(ServiceError) as full:
        await api.create_game(request(), Caller(peer=ADDRESSES[3]))
    assert full.value.reason == "TOO_MANY_GAMES"
    # open mode has no backends; a server with keys shows the backends' own caps
    keyed = await make_server(clock=clock, api_keys_file=door(tmp_path).keys,
                              backend_max_tables=2)
    keyed_api = keyed.running.api
    assert keyed_api is not None
    backend = Caller(peer=ADDRESSES[0], api_key=KEY_A)
    for _ in range(2):
        await keyed_api.create_game(request(), backend)
    with pytest.raises(ServiceError) as quota:
        await keyed_api.create_game(request(), backend)
    assert quota.value.reason == "TOO_MANY_GAMES"
    await keyed_api.create_game(request(), Caller(peer=ADDRESSES[0], api_key=KEY_B))


async def test_strangers_streams_never_lock_out_the_seated_players(
        make_server: ServerFactory) -> None:
    harness = await make_server(clock=ManualClock(), max_streams_per_table=2)
    stub = harness.stub
    game_id = (await stub.CreateGame(request())).game.game_id
    token = (await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))).seat_token
    spectators = [stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id)) for _ in range(2)]
    for stream in spectators:
        await stream.read()
    third = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await third.read()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    seated = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(token))
    assert (await seated.read()).events
    for stream in [*spectators, seated]:
        stream.cancel()


async def test_an_idle_connection_is_closed_by_the_server(make_server: ServerFactory) -> None:
    """grpc closes a connection without calls after --max-connection-idle-ms (a GOAWAY the
    channel sees as IDLE again); the next call reconnects."""
    harness = await make_server(clock=ManualClock(), max_connection_idle_ms=200)
    channel = harness.channel
    await harness.stub.ListGames(pb.ListGamesRequest())
    state = channel.get_state()
    assert state == grpc.ChannelConnectivity.READY
    while state == grpc.ChannelConnectivity.READY:  # the server's GOAWAY, not a timer of ours
        await asyncio.wait_for(channel.wait_for_state_change(state), timeout=30)
        state = channel.get_state()
    await harness.stub.ListGames(pb.ListGamesRequest())
