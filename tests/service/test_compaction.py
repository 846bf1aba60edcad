"""A long series keeps its live event log to the current game; streaming from 0 still gives
every event, identical, to every recipient."""

from __future__ import annotations

import asyncio

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.registry import rules_for
from tapis_service.codec import wire
from tapis_service.observe.clock import ManualClock
from tapis_service.tables import compaction
from tapis_service.tables.host import GameHost
from tests.support.calls import REVEAL, STREAM_DEADLINE_S, auth, new_war
from tests.support.driver import all_events, play_to_end
from tests.support.server import TEST_SETTINGS, Harness

NEXT = pb.Action(start_next_game=pb.StartNextGame())
GAMES = 8


async def _follow(h: Harness, game_id: str, token: str | None,
                  into: list[pb.Event]) -> None:
    stream = h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                 metadata=auth(token) if token else None, timeout=STREAM_DEADLINE_S)
    async for response in stream:
        into.extend(response.events)


async def test_a_long_series_keeps_the_live_log_bounded_and_replays_identically(
        server: Harness) -> None:
    game_id, tokens = await new_war(server, target=1)
    session = server.host.get(game_id)
    recipients: list[str | None] = [*tokens, None]
    live: dict[int, list[pb.Event]] = {i: [] for i in range(len(recipients))}
    followers = [asyncio.create_task(_follow(server, game_id, token, live[i]))
                 for i, token in enumerate(recipients)]
    longest_live_log = 0
    for number in range(GAMES):
        await play_to_end(server, game_id, tokens)
        longest_live_log = max(longest_live_log, len(session.events))
        if number < GAMES - 1:
            await server.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=NEXT),
                                           metadata=auth(tokens[0]))
    last = session.last_sequence
    while any(not events or events[-1].sequence < last for events in live.values()):
        await asyncio.sleep(0)
    for task in followers:
        task.cancel()
    # the live log holds the current game only; the seat claims and earlier games are bytes
    assert len(session.compacted) == GAMES
    assert all(len(games.blobs) == 1 and set(games.views.values()) == {0}
               for games in session.compacted)  # War hides nothing: one blob for all
    assert session.events[0].event.game_number == GAMES
    assert len(session.events) <= longest_live_log < last
    for i, token in enumerate(recipients):
        replayed = await all_events(server.stub, game_id, 0, last, token)
        assert replayed == live[i]
        assert [e.sequence for e in replayed] == list(range(1, last + 1))
        middle = session.compacted[2].first + 3
        resumed = await all_events(server.stub, game_id, middle, last, token)
        assert resumed == live[i][middle:]


async def test_private_views_are_kept_per_seat_byte_for_byte() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    rules = rules_for("basra")
    assert rules is not None
    session = await host.create(kind="basra", seats=2, seed=11, turn_time_ms=0,
                                bots=[None, None], options=rules.default_options(),
                                stacked_deck=None, stacked_first=None)
    recipients = (None, 0, 1)
    streams = {r: host.subscribe(session, r, 0)[0] for r in recipients}  # what streams get
    for seat in (0, 1):
        await host.join(session.game_id, seat, f"p{seat}")
    for number in range(2):
        while not session.table.game_over(rules):
            seat = session.awaiting()[0]
            action = rules.bot_action(session.table.state, seat, "random", number)
            await host.actor.submit(session, seat, tbl.Act(seat, action), "", None)
        if number == 0:
            await host.actor.submit(session, 0, tbl.NextGame(0), "", None)
    sent: dict[int | None, list[bytes]] = {r: [] for r in recipients}
    for recipient, stream in streams.items():
        assert not stream.overflowed
        while stream.pending:
            queued = stream.pending.popleft()
            assert queued is not None
            batch, message = queued
            frames = [wire.framed_event(session, e, recipient) for e in batch]
            assert message == b"".join(frames)  # what the stream was handed, as it sees them
            sent[recipient].extend(frames)
    compacted_upto = session.compacted[-1].last
    assert session.events[0].sequence == compacted_upto + 1
    assert len({session.compacted[-1].views[r] for r in recipients}) == 3  # private hands
    for recipient in recipients:
        replayed = [message for message, _ in compaction.replay(
            session.compacted, recipient, 0, chunk=64)]
        assert b"".join(replayed) == b"".join(sent[recipient][:compacted_upto])
        later = [m for m, _ in compaction.replay(session.compacted, recipient, 40, chunk=7)]
        assert b"".join(later) == b"".join(sent[recipient][40:compacted_upto])


async def test_a_retry_from_a_finished_game_gets_the_same_answer(server: Harness) -> None:
    game_id, tokens = await new_war(server, target=1)
    view = (await server.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    seat = view.awaiting_seats[0]
    request = pb.SubmitActionRequest(game_id=game_id, request_id="once",
                                     action=pb.Action(war=REVEAL.war))
    first = await server.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    await play_to_end(server, game_id, tokens)
    await server.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=NEXT),
                                   metadata=auth(tokens[0]))
    session = server.host.get(game_id)
    assert session.compacted and session.compacted[-1].last >= first.events[-1].sequence
    again = await server.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert again == first and len(again.events) >= 1
