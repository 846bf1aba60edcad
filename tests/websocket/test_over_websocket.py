"""The player WebSocket on a real server, with a real WebSocket client: the same game and the
same refusals as over gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.observe import metrics
from tapis_service.ws import frames
from tests.support.calls import auth, person_seats, reason_of
from tests.support.server import Harness, ServerFactory
from tests.support.websocket import Client, reason

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


@pytest.fixture
async def served(make_server: ServerFactory) -> Harness:
    return await make_server(ws_port=0)


async def socket_to(harness: Harness) -> Client:
    return await Client.open(f"ws://127.0.0.1:{harness.running.ws_port}/ws")


async def war_table(client: Client) -> tuple[str, list[str]]:
    """A War table for two persons, both joined: its id and the seat tokens."""
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2), seed=7,
        war=war_pb2.WarOptions(target_points=3)))
    game_id = created.create_game.game.game_id
    tokens = []
    for seat in (0, 1):
        joined = await client.call(join_game=pb.JoinGameRequest(game_id=game_id, seat=seat,
                                                                display_name=f"p{seat}"))
        tokens.append(joined.join_game.seat_token)
    return game_id, tokens


async def grpc_reason(harness: Harness, call: object, request: object,
                      token: str) -> tuple[grpc.StatusCode, str]:
    """The status code and reason gRPC refuses the same request with."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(request, metadata=auth(token))  # type: ignore[operator]
    return refused.value.code(), reason_of(refused.value)


async def test_a_war_game_is_played_over_the_socket(served: Harness) -> None:
    client = await socket_to(served)
    game_id, tokens = await war_table(client)
    follow = client.send(ws_pb.ClientFrame(
        seat_token=tokens[0], stream_events=pb.StreamEventsRequest(game_id=game_id)))
    over = False
    sequences: list[int] = []
    while not over:
        view = (await client.call(seat_token=tokens[0], get_game=pb.GetGameRequest(
            game_id=game_id))).get_game.game
        over = view.status == pb.GAME_STATUS_GAME_OVER
        for seat in view.awaiting_seats:
            answer = await client.call(seat_token=tokens[seat],
                                       submit_action=pb.SubmitActionRequest(
                                           game_id=game_id, action=REVEAL))
            assert answer.WhichOneof("response") == "submit_action", answer
    final = view
    while not sequences or sequences[-1] < final.last_sequence:
        frame = await client.receive()
        if frame.id == follow:
            sequences.extend(e.sequence for e in frame.events.events)
    assert sequences == list(range(1, final.last_sequence + 1))  # no gap, no duplicate
    assert final.war.HasField("winner")
    client.close()


async def test_refusals_are_the_same_as_over_grpc(served: Harness) -> None:
    client = await socket_to(served)
    game_id, tokens = await war_table(client)
    stub = served.stub
    cases = [
        ("bad token", "not-a-token", pb.GetGameRequest(game_id=game_id), "get_game",
         stub.GetGame),
        ("another seat", tokens[0], pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                                                           seat=1), "submit_action",
         stub.SubmitAction),
        ("stale version", tokens[0], pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                                                            expected_version=999),
         "submit_action", stub.SubmitAction),
        ("not your turn", tokens[1], pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
         "submit_action", stub.SubmitAction),
    ]
    seen = {}
    for name, token, request, field, call in cases:
        code, expected = await grpc_reason(served, call, request, token)
        answer = await client.call(seat_token=token, **{field: request})
        assert (answer.refusal.code, reason(answer)) == (code.value[0], expected), name
        seen[name] = expected
    assert seen == {"bad token": "INVALID_TOKEN", "another seat": "NOT_YOUR_SEAT",
                    "stale version": "STALE_VERSION", "not your turn": "NOT_YOUR_TURN"}
    client.send_raw(b"\x00" * (frames.MAX_FRAME_BYTES + 1))  # over the largest gRPC request
    assert reason(await client.receive()) == "VALUE_TOO_LONG"
    assert await client.closed() == 1009


async def test_an_unknown_game_kind_is_refused_on_both_doors_and_none_lists_all(
        served: Harness) -> None:
    """ListGames reads ``kind`` once for both transports: a number the contract does not
    define is INVALID_GAME_KIND (never "every kind"); unspecified lists every table."""
    client = await socket_to(served)
    game_id, _ = await war_table(client)
    for kind in (99, 5, -1):
        request = pb.ListGamesRequest(kind=kind)  # type: ignore[arg-type]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await served.stub.ListGames(request)
        assert (refused.value.code(), reason_of(refused.value)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_GAME_KIND"), kind
        answer = await client.call(list_games=request)
        assert (answer.refusal.code, reason(answer)) == (
            grpc.StatusCode.INVALID_ARGUMENT.value[0], "INVALID_GAME_KIND"), kind
        assert answer.refusal.message == refused.value.details() == f"unknown game kind {kind}"
    for kind in (pb.GAME_KIND_UNSPECIFIED, pb.GAME_KIND_WAR):
        request = pb.ListGamesRequest(kind=kind)
        listed = (await client.call(list_games=request)).list_games
        assert [g.game_id for g in listed.games] == [game_id]
        assert await served.stub.ListGames(request) == listed
    client.close()


async def test_several_tables_on_one_socket_and_a_stream_resumed(served: Harness) -> None:
    client = await socket_to(served)
    first, first_tokens = await war_table(client)
    second, second_tokens = await war_table(client)
    streams = {client.send(ws_pb.ClientFrame(stream_events=pb.StreamEventsRequest(
        game_id=game_id))): game_id for game_id in (first, second)}
    for game_id, tokens in ((first, first_tokens), (second, second_tokens)):
        await client.call(seat_token=tokens[0], submit_action=pb.SubmitActionRequest(
            game_id=game_id, action=REVEAL))
    ends = {game_id: (await client.call(get_game=pb.GetGameRequest(
        game_id=game_id))).get_game.game.last_sequence for game_id in (first, second)}
    last = {first: 0, second: 0}
    while last != ends:
        frame = await client.receive()
        if frame.id in streams:
            game_id = streams[frame.id]
            sequences = [e.sequence for e in frame.events.events]
            assert sequences[0] == last[game_id] + 1  # each table's own stream, in order
            last[game_id] = sequences[-1]
    client.close()
    again = await socket_to(served)
    resumed = again.send(ws_pb.ClientFrame(stream_events=pb.StreamEventsRequest(
        game_id=first, after_sequence=ends[first] - 2)))
    frame = await again.receive()
    assert frame.id == resumed
    assert [e.sequence for e in frame.events.events] == [ends[first] - 1, ends[first]]
    again.close()


async def test_sockets_from_one_address_are_capped(make_server: ServerFactory) -> None:
    harness = await make_server(ws_port=0, ws_max_sockets_per_peer=2)
    clients = [await socket_to(harness) for _ in range(2)]
    extra = await socket_to(harness)
    assert reason(await extra.receive()) == "TOO_MANY_STREAMS"
    assert await extra.closed() == 1013
    for client in clients:
        client.close()


async def test_a_stopping_server_ends_streams_with_where_to_resume(
        make_server: ServerFactory) -> None:
    harness = await make_server(ws_port=0)
    client = await socket_to(harness)
    game_id, tokens = await war_table(client)
    stream = client.send(ws_pb.ClientFrame(seat_token=tokens[0],
                                           stream_events=pb.StreamEventsRequest(game_id=game_id)))
    last = (await client.call(get_game=pb.GetGameRequest(game_id=game_id))).get_game.game
    seen = 0
    while seen < last.last_sequence:
        frame = await client.receive()
        if frame.id == stream and frame.HasField("events"):
            seen = frame.events.events[-1].sequence
    await harness.running.stop(5)
    ended = await client.receive()
    assert (ended.id, reason(ended)) == (stream, "SERVER_STOPPING")
    info = error_details_pb2.ErrorInfo()
    ended.refusal.details[0].Unpack(info)
    assert info.metadata["resume_after_sequence"] == str(seen)
    assert await client.closed() == 1001


async def test_the_socket_passes_the_servers_door(served: Harness) -> None:
    """The server's bound on calls in flight and its RPC metrics are the gRPC port's."""
    guard = served.running.guard
    assert guard is not None and served.running.ws is not None
    assert served.running.ws.door is guard.door
    client = await socket_to(served)
    door = guard.door
    held = door.max_in_flight - door.in_flight
    door.in_flight += held  # as many gRPC calls in flight as the server takes
    refused = await client.call(get_game=pb.GetGameRequest(game_id="0" * 16))
    assert reason(refused) == "OVERLOADED"
    door.in_flight -= held
    answered = await client.call(get_game=pb.GetGameRequest(game_id="0" * 16))
    assert reason(answered) == "GAME_NOT_FOUND"
    assert metrics.RPC_HANDLED.value("unary", "tapis.v1.GameService", "GetGame",
                                     "RESOURCE_EXHAUSTED", "websocket") >= 1
    client.close()


def hold(harness: Harness, field: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Requests of ``field`` over the socket wait, once they reached their route, until the
    second event is set (the first: one reached it); then they are served as before."""
    ws = harness.running.ws
    assert ws is not None
    call = ws.calls[field]
    reached, release = asyncio.Event(), asyncio.Event()

    async def held(request: Any, caller: Any) -> Any:
        reached.set()
        await release.wait()
        return await call.serve(request, caller)

    ws.calls[field] = call._replace(serve=held)
    return reached, release


async def test_a_request_taken_while_the_server_stops_is_refused_and_not_applied(
        served: Harness) -> None:
    """As gRPC's guard refuses a call taken once the stop began: SERVER_STOPPING, nothing
    applied; a request in flight before it is still answered within the grace."""
    client = await socket_to(served)
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
    game_id = created.create_game.game.game_id
    reached, release = hold(served, "get_game")
    in_flight = client.send(ws_pb.ClientFrame(get_game=pb.GetGameRequest(game_id=game_id)))
    await reached.wait()
    stopping = asyncio.ensure_future(served.running.stop(60))  # its grace waits for the read
    door = served.running.ws.door  # type: ignore[union-attr]
    while not door.closing:
        await asyncio.sleep(0)  # the stop's first steps
    join = await client.call(join_game=pb.JoinGameRequest(game_id=game_id, display_name="Al"))
    assert reason(join) == "SERVER_STOPPING"
    assert join.refusal.code == grpc.StatusCode.UNAVAILABLE.value[0]
    release.set()
    answered = await client.receive()
    assert answered.id == in_flight
    assert not answered.get_game.game.seats[0].taken  # the refused join changed nothing
    await asyncio.wait_for(stopping, 30)
    assert await client.closed() == 1001


@pytest.mark.parametrize(("field", "expected"), [("get_game", "SERVER_STOPPING"),
                                                 ("join_game", "COMMIT_UNKNOWN")])
async def test_a_request_in_flight_when_the_grace_ends_is_cut_with_a_precise_status(
        served: Harness, field: str, expected: str) -> None:
    """As gRPC's guard cuts its calls (``stopping.cut``): a read SERVER_STOPPING, a write
    COMMIT_UNKNOWN (it may have been applied), sent before the socket closes (1001)."""
    client = await socket_to(served)
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
    game_id = created.create_game.game.game_id
    reached, _ = hold(served, field)
    request = {"get_game": pb.GetGameRequest(game_id=game_id)} if field == "get_game" else \
        {"join_game": pb.JoinGameRequest(game_id=game_id, display_name="Al")}
    in_flight = client.send(ws_pb.ClientFrame(**request))
    await reached.wait()
    await served.running.stop(0)
    assert await client.closed() == 1001
    cut = client.collector.frames.get_nowait()  # sent before the close
    assert (cut.id, reason(cut)) == (in_flight, expected)
    assert cut.refusal.code == grpc.StatusCode.UNAVAILABLE.value[0]
    assert metrics.RPC_HANDLED.value("unary", "tapis.v1.GameService",
                                     "GetGame" if field == "get_game" else "JoinGame",
                                     "UNAVAILABLE", "websocket") >= 1
