"""A request id belongs to its sender (issue 36.3): another backend's CreateGame with a
victim's request id (the same body, another body, another game kind) gets a table of its own,
never the victim's table or its reserved seats' tokens — on one node, after a restart on
SQLite, and through another cluster node on PostgreSQL; the victim's own retry still gets its
first answer (with its tokens from the node serving the table). A JoinGame request id is its
sender's too, and a SubmitAction request id its
seat holder's (a ReplaceSeat's new holder gets none of the former holder's answers)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_engine import table as tbl
from tapis_engine.war import Reveal, WarOptions
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import RunningServer, create_server
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables.host import GameHost
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.session import HANDED_OVER, Session
from tests.support.calls import auth, reason_of
from tests.support.damage import FailingInstall, fail_restoring
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of, resting_of
from tests.trust.door import (
    KEY_A,
    KEY_B,
    REVEAL,
    Door,
    StartSecured,
    backend,
    door,
    play_war,
    refused,
    reserved_request,
    war_request,
)

VICTIM_ID = "match-1042"
"""A guessable request id."""


def other_kind(**fields: object) -> pb.CreateGameRequest:
    """Another body and another game kind than ``reserved_request``'s."""
    return pb.CreateGameRequest(kind=pb.GAME_KIND_BASRA, seats=2, seed=7, **fields)


def tokens_of(answer: pb.CreateGameResponse) -> list[str]:
    return [t.seat_token for t in answer.seat_tokens]


async def assert_own_tables(stub: pb_grpc.GameServiceStub, victim: pb.CreateGameResponse,
                            attacker: pb.CreateGameResponse) -> None:
    """The attacker got a table of its own: not the victim's id, not one of its tokens; its
    tokens do not play the victim's table, and its key does not read it."""
    assert attacker.game.game_id != victim.game.game_id
    assert not set(tokens_of(attacker)) & set(tokens_of(victim))
    for token in tokens_of(attacker):  # (another node's table: a token it does not know)
        assert await refused(stub.GetGame(pb.GetGameRequest(game_id=victim.game.game_id),
                                          metadata=auth(token))) in {
            (grpc.StatusCode.PERMISSION_DENIED, "TOKEN_FOR_ANOTHER_GAME"),
            (grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")}
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=victim.game.game_id),
                                      metadata=backend(KEY_B))) == (
        grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")


async def test_another_backend_s_create_with_a_victim_s_request_id_gets_its_own_table(
        tmp_path: Path, start_secured: StartSecured) -> None:
    stub = (await start_secured(door(tmp_path), tls=False)).stub
    victim = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                   metadata=backend(KEY_A))
    assert len(victim.seat_tokens) == 2
    # the same body: a table of its own, with tokens of its own
    same = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                 metadata=backend(KEY_B))
    await assert_own_tables(stub, victim, same)
    assert len(same.seat_tokens) == 2
    # another body, another kind: the attacker's own retry (its own first answer)
    again = await stub.CreateGame(other_kind(request_id=VICTIM_ID), metadata=backend(KEY_B))
    assert again.game.game_id == same.game.game_id
    assert tokens_of(again) == tokens_of(same)
    # the victim's retry: its own first answer, tokens and all
    retried = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                    metadata=backend(KEY_A))
    assert retried.game.game_id == victim.game.game_id
    assert tokens_of(retried) == tokens_of(victim)


async def test_another_backend_s_first_create_of_another_kind_gets_its_own_table(
        tmp_path: Path, start_secured: StartSecured) -> None:
    stub = (await start_secured(door(tmp_path), tls=False)).stub
    victim = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                   metadata=backend(KEY_A))
    other = await stub.CreateGame(other_kind(request_id=VICTIM_ID), metadata=backend(KEY_B))
    await assert_own_tables(stub, victim, other)
    assert other.game.kind == pb.GAME_KIND_BASRA and not other.seat_tokens


async def victim_stored(tmp_path: Path, start_secured: StartSecured
                        ) -> tuple[Door, Path, pb.CreateGameResponse]:
    """The victim's table of ``VICTIM_ID`` created on a server on SQLite, which then stops:
    its door's files, its data directory, and the victim's answer."""
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    victim = await first.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                         metadata=backend(KEY_A))
    await first.channel.close()
    await first.running.stop(0)
    return files, data, victim


async def test_after_a_restart_another_backend_still_gets_its_own_table(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files, data, victim = await victim_stored(tmp_path, start_secured)
    second = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    stub = second.stub
    for body in (reserved_request, other_kind):
        attacker = await stub.CreateGame(body(request_id=VICTIM_ID), metadata=backend(KEY_B))
        await assert_own_tables(stub, victim, attacker)
    retried = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                    metadata=backend(KEY_A))
    assert retried.game.game_id == victim.game.game_id
    assert tokens_of(retried) == tokens_of(victim)
    # and across a second restart, each backend's id still names its own table
    await second.channel.close()
    await second.running.stop(0)
    third = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    again = await third.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                        metadata=backend(KEY_B))
    assert again.game.game_id == attacker.game.game_id
    assert (await third.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                        metadata=backend(KEY_A))).game.game_id \
        == victim.game.game_id


@pytest.mark.parametrize("failure", ["restoring", "installing", "arming"])
async def test_a_retried_create_of_a_quarantined_table_is_refused_never_made_twice(
        tmp_path: Path, start_secured: StartSecured, monkeypatch: pytest.MonkeyPatch,
        failure: str) -> None:
    """The table of a CreateGame request id is quarantined at the restart (a bug met on it
    alone, restoring it, installing it or arming it): its backend's retry is told so
    (GAME_QUARANTINED, naming it), not handed a second table under the same id; another
    backend's same id still gets its own."""
    files, data, victim = await victim_stored(tmp_path, start_secured)
    if failure == "restoring":
        fail_restoring(monkeypatch, victim.game.game_id)
    else:
        FailingInstall(victim.game.game_id, failure == "arming").at_start(monkeypatch)
    second = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    stub = second.stub
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as retried:
            await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                  metadata=backend(KEY_A))
        assert retried.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert victim.game.game_id in (retried.value.details() or "")
        assert reason_of(retried.value) == "GAME_QUARANTINED"
    listed = await stub.ListGames(pb.ListGamesRequest(), metadata=backend(KEY_A))
    assert [g.game_id for g in listed.games] == [victim.game.game_id]  # no second table
    attacker = await stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                     metadata=backend(KEY_B))
    assert attacker.game.game_id != victim.game.game_id


async def test_a_victim_s_table_at_rest_stays_its_own_across_a_restart(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    victim = await first.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                         metadata=backend(KEY_A))
    game_id = victim.game.game_id
    assert await play_war(first.stub, game_id, tokens_of(victim),
                          metadata=auth(tokens_of(victim)[0])) > 0
    shelf = first.running.host.shelf
    assert int(shelf.rest_idle()) + int(shelf.rest_idle()) == 1  # finished, out of memory
    await first.channel.close()
    await first.running.stop(0)
    second = await start_secured(files, tls=False, store="sqlite", data_dir=data)
    assert game_id in resting_of(second.running.host)  # listed only, from its stored listing
    attacker = await second.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                            metadata=backend(KEY_B))
    assert game_id in resting_of(second.running.host)  # not even woken for another backend
    await assert_own_tables(second.stub, victim, attacker)
    retried = await second.stub.CreateGame(reserved_request(request_id=VICTIM_ID),
                                           metadata=backend(KEY_A))
    assert retried.game.game_id == game_id and tokens_of(retried) == tokens_of(victim)


async def test_a_join_request_id_is_its_sender_s(
        tmp_path: Path, start_secured: StartSecured) -> None:
    stub = (await start_secured(door(tmp_path), tls=False)).stub
    game_id = (await stub.CreateGame(war_request(visibility=pb.VISIBILITY_PUBLIC),
                                     metadata=backend(KEY_A))).game.game_id
    join = pb.JoinGameRequest(game_id=game_id, request_id="join-1")
    mine = await stub.JoinGame(join, metadata=backend(KEY_A))
    # a stranger without a key: a seat and a token of its own
    stranger = await stub.JoinGame(join)
    assert (stranger.seat, mine.seat) == (1, 0)
    assert stranger.seat_token != mine.seat_token
    # another backend: the table is full, so a refusal, not the first joiner's token
    assert await refused(stub.JoinGame(join, metadata=backend(KEY_B))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "NO_FREE_SEAT")
    # each sender's retry: its own first answer
    assert (await stub.JoinGame(join, metadata=backend(KEY_A))).seat_token == mine.seat_token
    assert (await stub.JoinGame(join)).seat_token == stranger.seat_token


async def test_a_submit_request_id_is_its_seat_s(
        tmp_path: Path, start_secured: StartSecured) -> None:
    stub = (await start_secured(door(tmp_path), tls=False)).stub
    game_id = (await stub.CreateGame(war_request(visibility=pb.VISIBILITY_PUBLIC),
                                     metadata=backend(KEY_A))).game.game_id
    tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id))).seat_token
              for _ in range(2)]
    act = pb.SubmitActionRequest(game_id=game_id, action=REVEAL, request_id="act-1")

    async def awaited() -> int:
        return (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.awaiting_seats[0]

    me = await awaited()
    first = await stub.SubmitAction(act, metadata=auth(tokens[me]))
    other_seat = await awaited()
    assert other_seat != me
    other = await stub.SubmitAction(act, metadata=auth(tokens[other_seat]))
    assert other.version == first.version + 1  # applied as its own input
    for seat, answer in ((me, first), (other_seat, other)):  # each seat's retry: its own
        assert await stub.SubmitAction(act, metadata=auth(tokens[seat])) == answer


OWNED = Ownership("backend-a", "private", ("u-1", "u-2"), ("Ada", "u-2"))


async def reserved_table(host: GameHost) -> Session:
    """A War table of backend-a's, its person seats claimed (as its create does)."""
    session = await host.create("war", 2, 9, 0, [None, None], WarOptions(target_points=10_000),
                                None, None, ownership=OWNED)
    for seat in (0, 1):
        await host.join(session.game_id, seat, OWNED.names[seat], f"\0reserved:{seat}",
                        "backend-a")
    return session


async def test_a_replaced_seat_s_new_holder_gets_none_of_the_former_holder_s_answers(
        tmp_path: Path) -> None:
    clock = ManualClock()
    host = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    session = await reserved_table(host)
    me = session.table.state.to_move
    applied = await host.actor.submit(session, me, tbl.Act(me, Reveal()), "act-1", None)
    assert session.remembered(me, "act-1") == applied
    await host.actor.replace(session, me, "u-9", "Linus", "r-1")
    assert session.remembered(me, "act-1") is None
    game_id = session.game_id
    await host.close()

    restarted = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    await restarted.recover()
    assert live_of(restarted)[game_id].remembered(me, "act-1") is None
    assert live_of(restarted)[game_id].join_requests == {  # the replaced seat's retry: refused
        ("backend-a", f"\0reserved:{seat}"): HANDED_OVER if seat == me else seat
        for seat in (0, 1)}
    await restarted.close()


async def start_node(url: str, keys: Path) -> RunningServer:
    port = free_port()
    return await create_server(replace(
        TEST_SETTINGS, port=port, store="postgres", database_url=url,
        advertise=f"127.0.0.1:{port}", node_ttl_s=3.0, api_keys_file=keys))


@pytest.mark.slow
async def test_through_another_cluster_node_another_backend_gets_its_own_table(
        tmp_path: Path, database_url: str) -> None:
    files = door(tmp_path)
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        nodes = [await start_node(database_url, files.keys) for _ in range(2)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{n.port}") for n in nodes]
        one, two = (pb_grpc.GameServiceStub(c) for c in channels)
        victim = await one.CreateGame(reserved_request(request_id=VICTIM_ID),
                                      metadata=backend(KEY_A))
        for stub in (two, one):  # another node first, then the victim's own node
            for body in (reserved_request, other_kind):
                attacker = await stub.CreateGame(body(request_id=VICTIM_ID),
                                                 metadata=backend(KEY_B))
                await assert_own_tables(stub, victim, attacker)
        # each backend's retry through the other node names its own table
        mine = await two.CreateGame(reserved_request(request_id=VICTIM_ID),
                                    metadata=backend(KEY_A))
        assert mine.game.game_id == victim.game.game_id
        assert not set(tokens_of(mine)) - set(tokens_of(victim))
        theirs = await one.CreateGame(other_kind(request_id=VICTIM_ID),
                                      metadata=backend(KEY_B))
        assert theirs.game.game_id == attacker.game.game_id != victim.game.game_id
        # the victim's node stops (its tables handed off): the retry at the node that takes
        # the table over gets the first answer again, tokens and all; the attacker, its own
        await channels.pop(0).close()
        await nodes.pop(0).stop(0)
        taken = await two.CreateGame(reserved_request(request_id=VICTIM_ID),
                                     metadata=backend(KEY_A))
        assert taken.game.game_id == victim.game.game_id
        assert tokens_of(taken) == tokens_of(victim)
        assert (await two.CreateGame(reserved_request(request_id=VICTIM_ID),
                                     metadata=backend(KEY_B))).game.game_id \
            == attacker.game.game_id
    finally:
        for channel in channels:
            await channel.close()
        for node in nodes:
            await node.stop(0)
