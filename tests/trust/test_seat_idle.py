"""Presence for a table's backend: a person seat the table awaits that has had no event stream
for --seat-idle-after gets a seat_idle record in the backend's results feed, once per absence;
a stream opened meanwhile starts the count again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tests.support.calls import STREAM_DEADLINE_S, auth
from tests.support.tables import live_of
from tests.trust.door import KEY_A, REVEAL, StartSecured, backend, door, reserved_request

IDLE_S = 60


async def filed(host: object) -> list[pb.ResultRecord]:
    clerk = host.clerk  # type: ignore[attr-defined]
    await clerk.settle()
    return [pb.ResultRecord.FromString(f.payload)
            for f in await clerk.feed.store.after("backend-a", 0, 100)]


async def test_an_awaited_seat_without_a_stream_is_filed_once_per_absence(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), seat_idle_after_s=IDLE_S,
                                  presence_debounce_ms=1000)
    host = secured.running.host
    clock = host.clock
    assert isinstance(clock, ManualClock)
    created = await secured.stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    tokens = [t.seat_token for t in created.seat_tokens]
    players = ["u-17", "u-42"]
    (away,) = created.game.awaiting_seats  # War: one seat reveals at a time
    here = 1 - away
    start = clock.now_ms()
    call = secured.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                     metadata=auth(tokens[here]), timeout=STREAM_DEADLINE_S)
    await caught_up(call, created.game.last_sequence)
    clock.advance(IDLE_S * 1000 - 1)
    assert await filed(host) == []
    clock.advance(1)
    records = await filed(host)
    assert [(r.WhichOneof("result"), r.seat_idle.seat, r.seat_idle.player_id,
             r.seat_idle.since.ToMilliseconds()) for r in records] == [
        ("seat_idle", away, players[away], start)]  # never streamed: since first seen
    assert records[0].game_id == game_id and records[0].seat_idle.game_number == 1
    await secured.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                    metadata=auth(tokens[away]))  # a call, not a stream
    view = (await secured.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=backend(KEY_A))).game
    assert list(view.awaiting_seats) == [here]
    assert [s.connected for s in view.seats] == [s == here for s in (0, 1)]

    await close(call, host, game_id)
    clock.advance(IDLE_S * 1000 // 2)
    back = secured.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                     metadata=auth(tokens[here]), timeout=STREAM_DEADLINE_S)
    await caught_up(back, view.last_sequence)  # back within the idle time: the count starts again
    clock.advance(IDLE_S * 1000)
    assert len(await filed(host)) == 1
    await close(back, host, game_id)
    left = clock.now_ms()
    clock.advance(IDLE_S * 1000)
    clock.advance(10 * IDLE_S * 1000)
    records = await filed(host)
    assert [(r.seat_idle.seat, r.seat_idle.player_id, r.seat_idle.since.ToMilliseconds())
            for r in records] == [(away, players[away], start), (here, players[here], left)]
    stream = secured.stub.WatchResults(pb.WatchResultsRequest(), metadata=backend(KEY_A))
    watched = list((await stream.read()).records)
    stream.cancel()
    assert [r.seat_idle.seat for r in watched] == [away, here]


async def caught_up(call: grpc.aio.UnaryStreamCall, last: int) -> None:
    """Read a new stream's backlog up to ``last`` (a stream left unread would end as too
    slow once the clock moves)."""
    seen = 0
    while seen < last:
        seen = (await call.read()).events[-1].sequence


async def close(call: grpc.aio.UnaryStreamCall, host: object, game_id: str) -> None:
    """Cancel a stream and wait (bounded) until the server has seen it end."""
    call.cancel()
    session = live_of(host)[game_id]  # type: ignore[attr-defined]
    for _ in range(500):
        if not session.presence.streams:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cancelled stream did not end")
