"""Every event carries the server time at which its input was applied; a restart keeps it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import create_server
from tapis_service.stores.sqlite_store import SqliteStore
from tests.support.calls import STREAM_DEADLINE_S, auth
from tests.support.driver import all_events
from tests.support.server import TEST_SETTINGS, Harness, ServerFactory

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
START = 1_700_000_000_000


async def war_game(stub: pb_grpc.GameServiceStub, clock: ManualClock) -> tuple[str, list[str]]:
    """A War game between two people; 1 s passes before each join. Returns id and tokens."""
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=11,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.game.game_id
    tokens = []
    for seat in (0, 1):
        clock.advance(1_000)
        joined = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat))
        tokens.append(joined.seat_token)
    return game_id, tokens


async def reveal(stub: pb_grpc.GameServiceStub, game_id: str, tokens: list[str]) -> list[pb.Event]:
    """The awaited seat reveals; the events of its answer."""
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    seat = view.awaiting_seats[0]
    answer = await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                     metadata=auth(tokens[seat]))
    return list(answer.events)


def times(events: list[pb.Event]) -> list[tuple[int, int]]:
    return [(e.sequence, e.time.ToMilliseconds()) for e in events]


async def test_each_event_has_the_time_its_input_was_applied(make_server: ServerFactory) -> None:
    clock = ManualClock(START)
    harness: Harness = await make_server(clock=clock)
    game_id, tokens = await war_game(harness.stub, clock)
    clock.advance(250)
    first = await reveal(harness.stub, game_id, tokens)
    clock.advance(1_500)
    second = await reveal(harness.stub, game_id, tokens)
    assert first and second
    assert {e.time.ToMilliseconds() for e in first} == {START + 2_250}
    assert {e.time.ToMilliseconds() for e in second} == {START + 3_750}
    streamed = await all_events(harness.stub, game_id, 0, second[-1].sequence)
    by_body = [(e.WhichOneof("body"), e.time.ToMilliseconds()) for e in streamed]
    assert by_body[:3] == [("seat_claimed", START + 1_000), ("seat_claimed", START + 2_000),
                           ("game_started", START + 2_000)]
    assert times(streamed[-len(first) - len(second):]) == times(first + second)
    # The player sees the same times as the spectator.
    seat_stream = harness.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                            metadata=auth(tokens[0]), timeout=STREAM_DEADLINE_S)
    seen: list[pb.Event] = []
    async for response in seat_stream:
        seen.extend(response.events)
        if seen[-1].sequence >= streamed[-1].sequence:
            seat_stream.cancel()
            break
    assert times(seen) == times(streamed)


async def test_event_times_survive_a_restart(tmp_path: Path) -> None:
    settings = replace(TEST_SETTINGS, store="sqlite", data_dir=tmp_path)
    clock = ManualClock(START)
    running = await create_server(settings, clock=clock, store=SqliteStore(tmp_path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        stub = pb_grpc.GameServiceStub(channel)
        game_id, tokens = await war_game(stub, clock)
        for _ in range(3):
            clock.advance(777)
            last = await reveal(stub, game_id, tokens)
        before = await all_events(stub, game_id, 0, last[-1].sequence)
    finally:
        await channel.close()
        await running.stop(0)
    assert sorted({e.time.ToMilliseconds() - START for e in before}) == [
        1_000, 2_000, 2_777, 3_554, 4_331]  # two joins, then three reveals
    later = ManualClock(START + 86_400_000)  # restarted a day later
    running = await create_server(settings, clock=later, store=SqliteStore(tmp_path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        after = await all_events(pb_grpc.GameServiceStub(channel), game_id, 0,
                                 before[-1].sequence)
    finally:
        await channel.close()
        await running.stop(0)
    assert times(after) == times(before)
