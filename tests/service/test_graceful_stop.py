"""A graceful stop (SIGTERM) ends every open event stream at once with UNAVAILABLE /
SERVER_STOPPING and where to resume, instead of holding the stop for its whole grace period;
the stream resumed there on the restarted server misses nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis_service.stores.sqlite_store import SqliteStore
from tests.support.calls import REVEAL, STREAM_DEADLINE_S, auth, view_of, war_for_two
from tests.support.server import ServerFactory

GRACE_S = 120.0
"""Far longer than the test may take: the stop must not wait for it."""


def info_of(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info


async def test_stopping_ends_streams_with_where_to_resume(make_server: ServerFactory,
                                                          tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "data")
    first = await make_server(store=store)
    game_id, tokens = await war_for_two(first)
    seen: list[pb.Event] = []
    stream = first.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                     metadata=auth(tokens[0]), timeout=STREAM_DEADLINE_S)

    async def read() -> grpc.aio.AioRpcError:
        try:
            async for response in stream:
                seen.extend(response.events)
        except grpc.aio.AioRpcError as error:
            return error
        raise AssertionError("the stream ended without a status")

    reading = asyncio.ensure_future(read())
    mover = (await view_of(first, game_id)).awaiting_seats[0]  # the deal decides who leads
    answer = await first.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id,
                                                                  action=REVEAL),
                                           metadata=auth(tokens[mover]))
    while not seen or seen[-1].sequence < answer.events[-1].sequence:
        await asyncio.sleep(0.01)  # the stream reader catching up, bounded by the test timeout

    await asyncio.wait_for(first.running.stop(GRACE_S), GRACE_S / 4)
    error = await asyncio.wait_for(reading, 10)
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    info = info_of(error)
    assert info.reason == "SERVER_STOPPING"
    assert info.metadata["resume_after_sequence"] == str(seen[-1].sequence)

    second = await make_server(store=SqliteStore(tmp_path / "data"))
    mover = (await view_of(second, game_id)).awaiting_seats[0]
    await second.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                   metadata=auth(tokens[mover]))
    view = (await second.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    resumed = second.stub.StreamEvents(pb.StreamEventsRequest(
        game_id=game_id, after_sequence=int(info.metadata["resume_after_sequence"])),
        metadata=auth(tokens[0]), timeout=STREAM_DEADLINE_S)
    async for response in resumed:
        seen.extend(response.events)
        if seen[-1].sequence >= view.last_sequence:
            break
    resumed.cancel()
    assert [e.sequence for e in seen] == list(range(1, view.last_sequence + 1))
