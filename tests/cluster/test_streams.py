"""Event streams across nodes: a stream relayed by one node from the table's owner breaks with
UNAVAILABLE when the owner is killed or the relaying node stops, and resumed (on any node)
from the last sequence seen it carries on with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.cluster.harness import StartNodes, resume_point
from tests.cluster.play import Stats, new_table, play_to_the_end

PLAYED_BEFORE = 8


async def follow(target: str, game_id: str, after: int, into: list[pb.Event],
                 ends: list[tuple[str, str]] | None = None) -> str:
    """Read the spectator stream after ``after`` into ``into`` until it breaks; its code
    (and into ``ends``, its reason and where it says to resume)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stream = pb_grpc.GameServiceStub(channel).StreamEvents(
            pb.StreamEventsRequest(game_id=game_id, after_sequence=after))
        try:
            async for response in stream:
                into.extend(response.events)
        except grpc.aio.AioRpcError as error:
            if ends is not None:
                ends.append(resume_point(error))
            return error.code().name
    return "OK"


async def keep_following(target: str, game_id: str, into: list[pb.Event]) -> None:
    """What a client does: resume after the last sequence seen whenever the stream breaks."""
    while True:
        code = await follow(target, game_id, into[-1].sequence if into else 0, into)
        assert code in ("UNAVAILABLE", "OK"), code
        await asyncio.sleep(0.05)  # a client's backoff before resuming


async def seen(events: list[pb.Event], sequence: int) -> None:
    while not events or events[-1].sequence < sequence:
        await asyncio.sleep(0.01)  # polling the stream reader, bounded by wait_for


@pytest.mark.parametrize("how", ["kill the owner", "stop the relaying node"])
async def test_a_relayed_stream_resumes_without_gap_or_duplicate(start_nodes: StartNodes,
                                                                 how: str) -> None:
    owner, relay, other = await start_nodes(3)
    stats = Stats()
    async with grpc.aio.insecure_channel(owner.address) as to_owner, \
            grpc.aio.insecure_channel(other.address) as to_other:
        table = await new_table(pb_grpc.GameServiceStub(to_owner), stats, "war", seed=21)
        events: list[pb.Event] = []
        ends: list[tuple[str, str]] = []
        reading = asyncio.ensure_future(follow(relay.address, table.game_id, 0, events, ends))
        at_other = pb_grpc.GameServiceStub(to_other)
        rng = random.Random(2)
        await play_to_the_end(at_other, stats, table, rng, max_actions=PLAYED_BEFORE)
        view = (await at_other.GetGame(pb.GetGameRequest(game_id=table.game_id))).game
        await asyncio.wait_for(seen(events, view.last_sequence), 20)
        if how == "kill the owner":
            owner.kill()
            resume_at = relay.address
        else:
            assert relay.terminate() == 0
            resume_at = other.address
        assert await asyncio.wait_for(reading, 20) == "UNAVAILABLE"
        if how == "kill the owner":  # where to resume: after the last event it relayed
            assert ends == [("TABLE_MOVED", str(events[-1].sequence))]
        resumed = asyncio.ensure_future(keep_following(resume_at, table.game_id, events))
        await play_to_the_end(at_other, stats, table, rng, max_actions=2 * PLAYED_BEFORE)
        view = (await at_other.GetGame(pb.GetGameRequest(game_id=table.game_id))).game
        await asyncio.wait_for(seen(events, view.last_sequence), 20)
        resumed.cancel()
    assert [e.sequence for e in events] == list(range(1, view.last_sequence + 1))
    assert stats.errors == []
