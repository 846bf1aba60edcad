"""ReplaceSeat over a real channel: a backend gives a seat to another player; the former token
is refused UNAUTHENTICATED / TOKEN_REVOKED at once (calls and open streams), a bot plays the
seat until the new holder takes it back, a retry answers the same token, and a durable server
keeps it all across a restart; in a cluster, through any node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import RunningServer, create_server
from tests.support.calls import STREAM_DEADLINE_S, auth
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of
from tests.trust.door import (
    KEY_A,
    KEY_B,
    OWN_CONNECTION,
    REVEAL,
    Secured,
    StartSecured,
    backend,
    door,
    refusal,
    refused,
    refused_saying,
    reserved_request,
    war_request,
)

PERSON = pb.SEAT_TYPE_PERSON
REVOKED = (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED")
SAYS_SEAT = "this seat token was revoked by the table's backend"
RECLAIM = pb.Action(reclaim_seat=pb.ReclaimSeat())


def replace_seat(game_id: str, seat: int, player_id: str = "", name: str = "",
                 request_id: str = "") -> pb.ReplaceSeatRequest:
    return pb.ReplaceSeatRequest(game_id=game_id, seat=seat, player_id=player_id,
                                 display_name=name, request_id=request_id)


async def get(stub: pb_grpc.GameServiceStub, game_id: str, token: str) -> pb.GameView:
    return (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(token))).game


async def play_out(secured: Secured, game_id: str, tokens: dict[int, str]) -> None:
    """Play the game to its end: each awaited seat that has a token reveals, a bot plays the
    others (the server's manual clock moves them)."""
    clock = secured.running.host.clock
    assert isinstance(clock, ManualClock)
    reader = next(iter(tokens.values()))
    while True:
        view = await get(secured.stub, game_id, reader)
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            return
        seat = view.awaiting_seats[0]
        if seat in tokens:
            await secured.stub.SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=REVEAL), metadata=auth(tokens[seat]))
        else:
            clock.advance(0)


async def test_a_replaced_seat_s_token_is_revoked_at_once_and_the_new_one_plays(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    old, other = (t.seat_token for t in created.seat_tokens)
    # the former holder follows the table, and so does the other player
    old_stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                   metadata=auth(old), timeout=STREAM_DEADLINE_S)
    assert (await old_stream.read()).events
    last = (await get(stub, game_id, other)).last_sequence
    other_stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id,
                                                            after_sequence=last),
                                     metadata=auth(other), timeout=STREAM_DEADLINE_S)
    # only the table's backend replaces
    request = replace_seat(game_id, 0, "u-99", "Linus", "replace-1")
    assert await refused(stub.ReplaceSeat(request)) == (
        grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
    assert await refused(stub.ReplaceSeat(request, metadata=backend(KEY_B))) == (
        grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE")
    replaced = await stub.ReplaceSeat(request, metadata=backend(KEY_A))
    assert (replaced.seat_token.seat, replaced.seat_token.player_id) == (0, "u-99")
    new = replaced.seat_token.seat_token
    assert new and new not in (old, other)
    assert not replaced.game.HasField("your_seat")  # the backend sees what a spectator sees
    # a retry answers the same token, and changes nothing more
    again = await stub.ReplaceSeat(request, metadata=backend(KEY_A))
    assert again.seat_token == replaced.seat_token
    assert again.game.version == replaced.game.version
    # the former token: its open stream ends, its calls are refused
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        while True:
            await old_stream.read()
    assert (*refusal(ended.value), ended.value.details()) == (*REVOKED, SAYS_SEAT)
    assert await refused_saying(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                             metadata=auth(old))) == (*REVOKED, SAYS_SEAT)
    assert await refused(stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=RECLAIM), metadata=auth(old))) == REVOKED
    with pytest.raises(grpc.aio.AioRpcError) as reopened:
        await stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                metadata=auth(old), timeout=STREAM_DEADLINE_S).read()
    assert (*refusal(reopened.value), reopened.value.details()) == (*REVOKED, SAYS_SEAT)
    # the other player is told, with the new name
    told = (await other_stream.read()).events[0]
    assert told.WhichOneof("body") == "seat_replaced"
    assert (told.seat_replaced.seat, told.seat_replaced.display_name) == (0, "Linus")
    other_stream.cancel()
    # the new holder sees seat 0's view: a bot plays it until it is taken back
    view = await get(stub, game_id, new)
    assert view.your_seat == 0 and list(view.legal_actions) == [RECLAIM]
    assert [s.display_name for s in view.seats] == ["Linus", "u-42"]
    assert view.seats[0].bot_controlled and view.seats[0].reserved
    await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=RECLAIM),
                            metadata=auth(new))
    await play_out(secured, game_id, {0: new, 1: other})
    ended_view = await get(stub, game_id, new)
    assert ended_view.status == pb.GAME_STATUS_GAME_OVER


async def test_without_a_player_the_bot_keeps_the_seat_for_good(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    old, other = (t.seat_token for t in created.seat_tokens)
    kicked = await stub.ReplaceSeat(replace_seat(game_id, 0), metadata=backend(KEY_A))
    assert kicked.seat_token == pb.SeatToken(seat=0)
    assert kicked.game.seats[0].bot_controlled and not kicked.game.seats[0].reserved
    assert kicked.game.seats[0].display_name == ""
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                      metadata=auth(old))) == REVOKED
    await play_out(secured, game_id, {1: other})
    assert (await get(stub, game_id, other)).status == pb.GAME_STATUS_GAME_OVER


@pytest.mark.parametrize(("fields", "expected"), [
    ({"seat": 2, "player_id": "u-99"}, (grpc.StatusCode.INVALID_ARGUMENT,
                                        "INVALID_SEAT_CONFIG")),
    ({"seat": 1, "player_id": "u-17"}, (grpc.StatusCode.INVALID_ARGUMENT,
                                        "INVALID_SEAT_CONFIG")),
    ({"seat": 0, "display_name": "Nobody"}, (grpc.StatusCode.INVALID_ARGUMENT,
                                             "INVALID_SEAT_CONFIG")),
    ({"seat": 0, "player_id": "u" * 129}, (grpc.StatusCode.INVALID_ARGUMENT,
                                           "VALUE_TOO_LONG")),
])
async def test_what_a_replace_may_not_ask(tmp_path: Path, start_secured: StartSecured,
                                          fields: dict[str, object],
                                          expected: tuple[grpc.StatusCode, str]) -> None:
    secured = await start_secured(door(tmp_path))
    game_id = (await secured.stub.CreateGame(reserved_request(),
                                             metadata=backend(KEY_A))).game.game_id
    assert await refused(secured.stub.ReplaceSeat(pb.ReplaceSeatRequest(
        game_id=game_id, **fields), metadata=backend(KEY_A))) == expected


async def test_a_bot_seat_an_ended_table_or_a_finished_series_is_not_replaced(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    with_bot = reserved_request()
    with_bot.seat_configs[1].CopyFrom(pb.SeatConfig(type=pb.SEAT_TYPE_BOT))
    game_id = (await stub.CreateGame(with_bot, metadata=backend(KEY_A))).game.game_id
    assert await refused(stub.ReplaceSeat(replace_seat(game_id, 1, "u-99"),
                                          metadata=backend(KEY_A))) == (
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")
    await stub.EndTable(pb.EndTableRequest(game_id=game_id), metadata=backend(KEY_A))
    assert await refused(stub.ReplaceSeat(replace_seat(game_id, 0, "u-99"),
                                          metadata=backend(KEY_A))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "GAME_ABANDONED")
    created = await stub.CreateGame(reserved_request(series_length=1), metadata=backend(KEY_A))
    series = created.game.game_id
    await play_out(secured, series, {t.seat: t.seat_token for t in created.seat_tokens})
    assert await refused(stub.ReplaceSeat(replace_seat(series, 0, "u-99"),
                                          metadata=backend(KEY_A))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "SERIES_OVER")


async def test_open_mode_has_no_backend_to_replace_a_seat(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), tls=False, keys=False)
    game_id = (await secured.stub.CreateGame(war_request())).game.game_id
    assert await refused(secured.stub.ReplaceSeat(replace_seat(game_id, 0, "u-1"))) == (
        grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")


def durable(tmp_path: Path, start_secured: StartSecured) -> Callable[[], Awaitable[Any]]:
    """Start a keyed server on SQLite, on the same data directory at each call (a restart)."""
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    return lambda: start_secured(files, store="sqlite", data_dir=data)


async def test_a_durable_server_keeps_a_replacement_across_a_restart(
        tmp_path: Path, start_secured: StartSecured) -> None:
    start = durable(tmp_path, start_secured)
    first = await start()
    created = await first.stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    old, other = (t.seat_token for t in created.seat_tokens)
    request = replace_seat(game_id, 1, "u-7", "Grace", "replace-7")
    replaced = await first.stub.ReplaceSeat(request, metadata=backend(KEY_A))
    await first.channel.close()
    await first.running.stop(0)
    second = await start()
    stub = second.stub
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                      metadata=auth(other))) == REVOKED
    again = await stub.ReplaceSeat(request, metadata=backend(KEY_A))
    assert again.seat_token == replaced.seat_token  # the retry after the restart too
    new = replaced.seat_token.seat_token
    view = await get(stub, game_id, new)
    assert view.your_seat == 1 and [s.display_name for s in view.seats] == ["Ada", "Grace"]
    assert view.seats[1].bot_controlled
    # a second replace of the seat: the next generation, the restored token revoked in turn
    second_replace = await stub.ReplaceSeat(replace_seat(game_id, 1, "u-7"),
                                            metadata=backend(KEY_A))
    assert second_replace.seat_token.seat_token not in (new, other)
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                      metadata=auth(new))) == REVOKED
    await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=RECLAIM),
                            metadata=auth(second_replace.seat_token.seat_token))
    await play_out(second, game_id, {0: old, 1: second_replace.seat_token.seat_token})


async def holders(stub: pb_grpc.GameServiceStub, game_id: str,
                  token: str) -> list[tuple[str, int, str]]:
    """What StreamEvents from the start says of the seats' holders: each SeatClaimed and
    SeatReplaced event, as (its body, its seat, the name it gives)."""
    last = (await get(stub, game_id, token)).last_sequence
    stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(token),
                               timeout=STREAM_DEADLINE_S)
    said: list[tuple[str, int, str]] = []
    async for message in stream:
        for event in message.events:
            body = event.WhichOneof("body")
            if body in ("seat_claimed", "seat_replaced"):
                told = getattr(event, body)
                said.append((body, told.seat, told.display_name))
        if message.events[-1].sequence >= last:
            stream.cancel()
            return said
    raise AssertionError("the stream ended first")


async def test_the_history_names_each_seat_s_holder_as_of_each_event(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """StreamEvents from the start says who held a seat at each event: the SeatClaimed of a
    seat replaced since names its first holder and each SeatReplaced the holder it gave the
    seat to ("" for nobody), not the seat's holder now; so after its game's events are
    compacted, and after a durable server's restart replays the journal."""
    start = durable(tmp_path, start_secured)
    first = await start()
    created = await first.stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    other = created.seat_tokens[1].seat_token
    for player_id, name in (("u-99", "Linus"), ("", ""), ("u-7", "Grace")):
        await first.stub.ReplaceSeat(replace_seat(game_id, 0, player_id, name),
                                     metadata=backend(KEY_A))
    history = [("seat_claimed", 0, "Ada"), ("seat_claimed", 1, "u-42"),
               ("seat_replaced", 0, "Linus"), ("seat_replaced", 0, ""),
               ("seat_replaced", 0, "Grace")]
    assert await holders(first.stub, game_id, other) == history
    await play_out(first, game_id, {1: other})  # a bot plays seat 0 until it is reclaimed
    await first.stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
        metadata=auth(other))
    assert live_of(first.running.host)[game_id].compacted  # game 1's events are bytes now
    assert await holders(first.stub, game_id, other) == history
    await first.channel.close()
    await first.running.stop(0)
    second = await start()  # from the journal
    assert await holders(second.stub, game_id, other) == history


async def test_a_replace_through_another_node_of_a_cluster(tmp_path: Path,
                                                           postgres: Postgres) -> None:
    """Relayed to the table's owner (the stream of the former token too); once the owner
    stops, the node that takes the table over rebuilds the replacement from PostgreSQL."""
    files = door(tmp_path)
    database = await postgres.create_database()
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        for _ in range(2):
            port = free_port()
            nodes.append(await create_server(replace(
                TEST_SETTINGS, port=port, store="postgres", database_url=postgres.url(database),
                advertise=f"127.0.0.1:{port}", node_ttl_s=3.0, api_keys_file=files.keys)))
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                                      options=OWN_CONNECTION))
        owner, other = (pb_grpc.GameServiceStub(c) for c in channels)
        created = await owner.CreateGame(reserved_request(), metadata=backend(KEY_A))
        game_id = created.game.game_id
        assert game_id in live_of(nodes[0].host) and game_id not in live_of(nodes[1].host)
        old = created.seat_tokens[0].seat_token
        stream = other.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                    metadata=auth(old), timeout=STREAM_DEADLINE_S)
        assert (await stream.read()).events
        request = replace_seat(game_id, 0, "u-99", "Linus", "replace-1")
        replaced = await other.ReplaceSeat(request, metadata=backend(KEY_A))
        assert (await other.ReplaceSeat(request, metadata=backend(KEY_A))) == replaced
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            while True:
                await stream.read()
        assert refusal(ended.value) == REVOKED
        new = replaced.seat_token.seat_token
        assert (await get(other, game_id, new)).your_seat == 0
        await nodes.pop(0).stop(0)
        assert await refused(other.GetGame(pb.GetGameRequest(game_id=game_id),
                                           metadata=auth(old))) == REVOKED
        assert game_id in live_of(nodes[0].host)  # taken over, from the journal
        view = await get(other, game_id, new)
        assert view.your_seat == 0 and view.seats[0].display_name == "Linus"
        assert (await other.ReplaceSeat(request, metadata=backend(KEY_A))) == replaced
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


async def test_the_new_holder_sees_its_seat_s_hand_only(tmp_path: Path,
                                                        start_secured: StartSecured) -> None:
    """Basra hides hands: the new token sees seat 1's hand — the one seat 1 held — and not
    seat 0's; the backend's answer shows no hand at all."""
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BASRA, seats=2, seed=7, seat_configs=[
            pb.SeatConfig(type=PERSON, player_id=f"u-{seat}") for seat in (0, 1)]),
        metadata=backend(KEY_A))
    game_id = created.game.game_id
    first, second = (t.seat_token for t in created.seat_tokens)
    hands = [list((await get(stub, game_id, token)).basra.hand) for token in (first, second)]
    assert hands[0] and hands[1] and hands[0] != hands[1]
    replaced = await stub.ReplaceSeat(replace_seat(game_id, 1, "u-9"), metadata=backend(KEY_A))
    assert not replaced.game.basra.hand and not replaced.game.basra.HasField("seat")
    seen = (await get(stub, game_id, replaced.seat_token.seat_token)).basra
    assert seen.seat == 1 and list(seen.hand) == hands[1]
    assert not {c.SerializeToString() for c in seen.hand} & {
        c.SerializeToString() for c in hands[0]}


async def test_a_join_retried_after_its_seat_was_replaced_is_refused_not_shown_the_seat(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """A JoinGame's retry (the same request id) answered the seat it claimed, with its token
    and view: once the backend replaced that seat, the view was the new holder's hand. It is
    refused TOKEN_REVOKED, as the former token is, across a restart too."""
    start = durable(tmp_path, start_secured)
    first = await start()
    created = await first.stub.CreateGame(war_request(visibility=pb.VISIBILITY_PUBLIC),
                                          metadata=backend(KEY_A))
    game_id = created.game.game_id
    join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-al")
    joined = await first.stub.JoinGame(join)  # the first free seat
    assert joined.seat == 0
    assert (await first.stub.JoinGame(join)).seat_token == joined.seat_token  # a retry
    await first.stub.ReplaceSeat(replace_seat(game_id, 0, "u-9", "Bea"),
                                 metadata=backend(KEY_A))
    assert await refused_saying(first.stub.JoinGame(join)) == (*REVOKED, SAYS_SEAT)
    await first.channel.close()
    await first.running.stop(0)
    second = await start()  # from the journal
    assert await refused_saying(second.stub.JoinGame(join)) == (*REVOKED, SAYS_SEAT)


async def test_a_create_retried_after_a_replace_hands_out_the_seats_current_tokens(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """The retry of a CreateGame answers each reserved seat's token: the new holder's for a
    seat replaced since (ReplaceSeat's), never the revoked one under the new player's id."""
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    create = reserved_request(request_id="create-1")
    created = await stub.CreateGame(create, metadata=backend(KEY_A))
    game_id = created.game.game_id
    replaced = await stub.ReplaceSeat(replace_seat(game_id, 0, "u-99", "Linus"),
                                      metadata=backend(KEY_A))
    again = await stub.CreateGame(create, metadata=backend(KEY_A))
    assert again.game.game_id == game_id
    assert list(again.seat_tokens) == [replaced.seat_token, created.seat_tokens[1]]
    view = await get(stub, game_id, again.seat_tokens[0].seat_token)
    assert view.your_seat == 0
