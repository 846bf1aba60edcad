"""Stream caps (per table, per connection, per address) and the cut-off of a stream whose client
stops reading."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tests.support.calls import STREAM_DEADLINE_S, reason_of, refusal, war_for_two
from tests.support.server import ServerFactory
from tests.support.tables import live_of

# a client that buffers little and does not grow its window: flow control fills up fast
SMALL_WINDOW = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16_384),
                ("grpc.use_local_subchannel_pool", 1)]


async def first_message(call: grpc.aio.UnaryStreamCall) -> pb.StreamEventsResponse:
    message = await call.read()
    assert isinstance(message, pb.StreamEventsResponse)
    return message


async def test_streams_beyond_a_tables_cap_are_refused(make_server: ServerFactory) -> None:
    h = await make_server(clock=ManualClock(), max_streams_per_table=2)
    game_id, _ = await war_for_two(h)
    other_id, _ = await war_for_two(h)
    calls = [h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                 timeout=STREAM_DEADLINE_S) for _ in range(2)]
    for call in calls:
        await first_message(call)
    code, reason, _ = await refusal(h.stub.StreamEvents(pb.StreamEventsRequest(
        game_id=game_id), timeout=STREAM_DEADLINE_S).read())
    assert (code, reason) == ("RESOURCE_EXHAUSTED", "TOO_MANY_STREAMS")
    await first_message(h.stub.StreamEvents(pb.StreamEventsRequest(game_id=other_id),
                                            timeout=STREAM_DEADLINE_S))
    calls[0].cancel()
    while len(live_of(h.host)[game_id].subscribers) > 1:  # the cancel reaches the server
        await asyncio.sleep(0.01)
    await first_message(h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                            timeout=STREAM_DEADLINE_S))


async def test_streams_beyond_a_connections_or_an_addresss_cap_are_refused(
        make_server: ServerFactory) -> None:
    h = await make_server(clock=ManualClock(), max_streams_per_connection=2,
                          max_streams_per_peer=3)
    games = [(await war_for_two(h))[0] for _ in range(4)]
    for game_id in games[:2]:
        await first_message(h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                                timeout=STREAM_DEADLINE_S))
    code, reason, details = await refusal(h.stub.StreamEvents(pb.StreamEventsRequest(
        game_id=games[2]), timeout=STREAM_DEADLINE_S).read())
    assert (code, reason) == ("RESOURCE_EXHAUSTED", "TOO_MANY_STREAMS")
    assert "connection" in details
    second = grpc.aio.insecure_channel(f"127.0.0.1:{h.running.port}",
                                       options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        stub = pb_grpc.GameServiceStub(second)
        await first_message(stub.StreamEvents(pb.StreamEventsRequest(game_id=games[2]),
                                              timeout=STREAM_DEADLINE_S))
        code, reason, details = await refusal(stub.StreamEvents(pb.StreamEventsRequest(
            game_id=games[3]), timeout=STREAM_DEADLINE_S).read())
        assert (code, reason) == ("RESOURCE_EXHAUSTED", "TOO_MANY_STREAMS")
        assert "address" in details
    finally:
        await second.close()


async def test_a_stream_that_stops_reading_is_cut_and_freed(make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, stream_stall_ms=5_000)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=8, seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT)] * 2,
        war=war_pb2.WarOptions(target_points=300)))
    game_id = created.game.game_id
    clock.advance(1)  # the bots play the whole game: thousands of events to stream
    session = live_of(h.host)[game_id]
    assert session.last_sequence > 1500
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{h.running.port}", options=SMALL_WINDOW)
    try:
        call = pb_grpc.GameServiceStub(channel).StreamEvents(
            pb.StreamEventsRequest(game_id=game_id), timeout=STREAM_DEADLINE_S)
        guard = h.running.api.streams  # type: ignore[union-attr]
        for _ in range(1000):  # until the server's write waits on the client that never reads
            stalled = [s for s in guard.open if s.writing_since is not None]
            if stalled:
                break
            await asyncio.sleep(0.01)
        assert stalled, "the stream never filled up"
        for _ in range(100):
            clock.advance(5_000)
            await asyncio.sleep(0.01)
            if not session.subscribers:
                break
        assert not session.subscribers and not guard.open  # freed without the client reading
        assert guard.cut_count == 1
        received = (await read_to_the_cut(call))[-1]
        assert 0 < received < session.last_sequence
    finally:
        await channel.close()


async def test_a_stream_cut_while_its_first_message_is_in_flight_still_ends(
        make_server: ServerFactory) -> None:
    """The watchdog may cut a stream during its very first write (its headers still pending):
    the client still gets that message, then STREAM_TOO_SLOW, not a stream left open."""
    clock = ManualClock()
    h = await make_server(clock=clock, stream_stall_ms=5_000)
    game_id, _ = await war_for_two(h)
    call = h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), timeout=STREAM_DEADLINE_S)
    guard = h.running.api.streams  # type: ignore[union-attr]
    # one loop turn at a time: a grpc write completes through the loop, so the handler is still
    # suspended in its first write on the turn after it began it
    for _ in range(100_000):
        writing = [s for s in guard.open if s.writing_since is not None]
        if writing or call.done():
            break
        await asyncio.sleep(0)
    assert writing, "the stream never began writing"
    first = writing[0].last
    clock.advance(5_000)  # the watchdog's sweep finds that write pending: the stream is cut
    assert guard.cut_count == 1 and not guard.open
    assert await read_to_the_cut(call) == [first]  # that first message, then the end


async def read_to_the_cut(call: grpc.aio.UnaryStreamCall) -> list[int]:
    """Read a cut stream to its end: it must end with STREAM_TOO_SLOW saying to resume after
    the last event received. The last sequence of each message received."""
    received = [0]
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async for message in call:
            received.append(message.events[-1].sequence)
    error = ended.value
    assert (error.code(), reason_of(error)) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                                "STREAM_TOO_SLOW"), error
    # the client resumes from the last event it received: no gap, no duplicate
    assert (error.details() or "").endswith(f"resume with after_sequence={received[-1]}")
    return received[1:]
