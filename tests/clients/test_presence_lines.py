"""The CLI's connection hands the table's presence changes to whoever asks, besides the events
(the app writes "X went away" / "X is back" from them)."""

from __future__ import annotations

import asyncio

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.connection import Connection
from tapis_service.observe.clock import ManualClock
from tests.support.calls import auth, war_for_two
from tests.support.server import ServerFactory
from tests.support.tables import live_of


async def test_presence_changes_reach_the_caller_between_events(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, presence_debounce_ms=1000)
    game_id, tokens = await war_for_two(h)
    conn = Connection(f"127.0.0.1:{h.running.port}")
    heard: list[tuple[int, bool]] = []
    told = asyncio.Event()

    def on_presence(change: pb.PresenceChanged) -> None:
        heard.append((change.seat, change.connected))
        told.set()

    async def follow() -> None:
        async for _event in conn.events(game_id, 0, tokens[0], on_presence=on_presence):
            pass

    following = asyncio.ensure_future(follow())
    other = h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                metadata=auth(tokens[1]))
    await other.read()
    session = live_of(h.host)[game_id]
    for _ in range(500):  # bounded: until the server holds both seats' streams
        if session.presence is not None and set(session.presence.streams) == {0, 1}:
            break
        await asyncio.sleep(0.01)
    other.cancel()
    for _ in range(500):
        if set(session.presence.streams) == {0}:
            break
        await asyncio.sleep(0.01)
    clock.advance(1000)
    await asyncio.wait_for(told.wait(), 30)
    assert heard == [(1, False)]
    following.cancel()
    await conn.close()
