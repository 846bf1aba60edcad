"""Presence: each seat's view says whether its person has a stream open now; the streams that
ask hear when a seat's last stream goes (after the debounce: a quick reconnect is not noise) and
when it comes back; spectators and streams that did not ask hear nothing of it."""

from __future__ import annotations

import asyncio

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tests.support.calls import REVEAL, STREAM_DEADLINE_S, auth, war_for_two
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of

DEBOUNCE_MS = 5000


def stream(h: Harness, game_id: str, token: str | None, with_presence: bool = True,
           ) -> grpc.aio.UnaryStreamCall:
    return h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id,
                                                      with_presence=with_presence),
                               metadata=auth(token) if token else None,
                               timeout=STREAM_DEADLINE_S)


async def caught_up(h: Harness, game_id: str, call: grpc.aio.UnaryStreamCall) -> None:
    """Read a new stream's backlog, up to the table's last event."""
    last = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.last_sequence
    seen = 0
    while seen < last:
        seen = (await call.read()).events[-1].sequence


async def connected(h: Harness, game_id: str) -> list[bool]:
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    return [seat.connected for seat in view.seats]


async def settled(h: Harness, game_id: str, expected: list[bool]) -> None:
    """Wait (bounded) until the server has seen the streams opened or cancelled so far."""
    for _ in range(500):
        if await connected(h, game_id) == expected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the seats never were connected as {expected}")


def change(response: pb.StreamEventsResponse) -> tuple[int, bool, int]:
    assert not response.events and len(response.presence) == 1
    told = response.presence[0]
    return told.seat, told.connected, told.time.ToMilliseconds()


async def test_views_say_who_streams_and_streams_hear_departures_and_returns(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, presence_debounce_ms=DEBOUNCE_MS)
    game_id, tokens = await war_for_two(h)
    assert await connected(h, game_id) == [False, False]
    watcher = stream(h, game_id, tokens[0])  # seat 0 hears of seat 1
    plain = stream(h, game_id, None, with_presence=False)  # a spectator that did not ask
    await caught_up(h, game_id, watcher)
    await caught_up(h, game_id, plain)
    await settled(h, game_id, [True, False])

    first = stream(h, game_id, tokens[1])
    await first.read()
    await settled(h, game_id, [True, True])
    first.cancel()
    await settled(h, game_id, [True, False])
    clock.advance(DEBOUNCE_MS - 1)
    again = stream(h, game_id, tokens[1])  # back within the debounce: nobody is told
    await again.read()
    await settled(h, game_id, [True, True])
    clock.advance(DEBOUNCE_MS)

    again.cancel()
    await settled(h, game_id, [True, False])
    gone_at = clock.now_ms()
    clock.advance(DEBOUNCE_MS - 1)
    assert live_of(h.host)[game_id].presence.announced_gone == set()
    clock.advance(1)
    assert change(await watcher.read()) == (1, False, gone_at)  # the first message since
    back = stream(h, game_id, tokens[1])
    await back.read()
    assert change(await watcher.read()) == (1, True, clock.now_ms())
    assert await connected(h, game_id) == [True, True]

    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(tokens[view.awaiting_seats[0]]))
    told = await plain.read()  # the spectator that did not ask: the action's events only
    assert told.events and not told.presence
    assert (await watcher.read()).events
    for call in (watcher, plain, back):
        call.cancel()


async def test_a_seat_s_view_counts_every_stream_of_the_seat(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, presence_debounce_ms=DEBOUNCE_MS)
    game_id, tokens = await war_for_two(h)
    one, two = stream(h, game_id, tokens[0]), stream(h, game_id, tokens[0])
    await one.read()
    await two.read()
    await settled(h, game_id, [True, False])
    one.cancel()
    state = live_of(h.host)[game_id].presence
    for _ in range(500):  # bounded: until the server has seen the cancelled stream end
        if state.streams == {0: 1}:
            break
        await asyncio.sleep(0.01)
    assert state.streams == {0: 1}
    clock.advance(DEBOUNCE_MS)
    assert not state.announced_gone and not state.absent_since
    assert await connected(h, game_id) == [True, False]  # its other stream is still open
    two.cancel()
    await settled(h, game_id, [False, False])
