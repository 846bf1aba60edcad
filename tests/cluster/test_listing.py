"""ListGames on a cluster costs a page per node, whatever the tables held: every node lists in
one order (creation time, then id; the quarantined tables after the others, by id), a page
asks each node for one page from the client's position and merges the answers (counted, not
timed). The walk of all pages lists every table exactly once, in that order; a token of the
old offset kind is refused, and so is an unknown game kind; a backend's private tables are
listed to it alone, through any node. Nodes run in this process (``create_server``)."""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.codec import convert
from tapis_service.process.server import RunningServer, create_server
from tapis_service.tables.healing import Quarantined
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.paging import MAX_PAGE
from tests.support.calls import auth, refusal
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of, quarantined_of
from tests.trust.door import KEY_A, KEY_B, backend, door, play_war

NODES = 3
PER_NODE = 20
QUARANTINED = 3
PAGE = 7


async def start_node(url: str, keys: Path | None = None) -> RunningServer:
    port = free_port()
    return await create_server(replace(
        TEST_SETTINGS, port=port, store="postgres", database_url=url,
        advertise=f"127.0.0.1:{port}", node_ttl_s=3.0, api_keys_file=keys,
        keyless_address_share=0.0))  # one client pages through every table at once


async def test_a_cluster_page_asks_each_node_for_a_page(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    database = await postgres.create_database()
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        nodes = [await start_node(postgres.url(database)) for _ in range(NODES)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{n.port}") for n in nodes]
        stubs = [pb_grpc.GameServiceStub(c) for c in channels]
        for _ in range(PER_NODE):  # interleaved in time over the nodes
            for stub in stubs:
                await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
        for number, node in enumerate(nodes):  # damaged tables: listed last, by id
            for at in range(QUARANTINED):
                node.host.tables.quarantine(f"q{at}{number}",
                                            Quarantined("war", "damaged", Ownership()))
        assert all(len(live_of(n.host)) == PER_NODE for n in nodes)
        expected = [game_id for _, game_id in sorted(
            (session.created_ms, game_id) for n in nodes
            for game_id, session in live_of(n.host).items())]
        expected += sorted(game_id for n in nodes for game_id in quarantined_of(n.host))

        answered: Counter[int] = Counter()  # lines each node answered for the page
        for name in ("listing", "quarantined_listing"):
            original = getattr(convert, name)

            def counted(*args: Any, _original: Any = original) -> pb.GameListing:
                line = _original(*args)
                answered.update(number for number, n in enumerate(nodes)
                                if line.game_id in live_of(n.host)
                                or line.game_id in quarantined_of(n.host))
                return line

            monkeypatch.setattr(convert, name, counted)

        for asked in range(NODES):  # through any node, the same walk
            seen: list[str] = []
            token = ""
            while True:
                answered.clear()
                examined = [n.host.lobby.examined for n in nodes]
                answer = await stubs[asked].ListGames(pb.ListGamesRequest(
                    page_size=PAGE, page_token=token))
                assert not answer.partial and len(answer.games) <= PAGE
                assert all(n.host.lobby.examined - before <= PAGE + 1
                           for n, before in zip(nodes, examined, strict=True))
                assert all(lines <= PAGE for lines in answered.values())
                seen.extend(g.game_id for g in answer.games)
                token = answer.next_page_token
                if not token:
                    break
            assert seen == expected  # every table once, in order

        whole = await stubs[0].ListGames(pb.ListGamesRequest(page_size=MAX_PAGE))
        assert [g.game_id for g in whole.games] == expected and not whole.next_page_token
        offset = base64.urlsafe_b64encode(str(PAGE).encode()).decode()  # a token of old
        code, reason, _ = await refusal(stubs[1].ListGames(pb.ListGamesRequest(
            page_size=PAGE, page_token=offset)))
        assert (code, reason) == ("INVALID_ARGUMENT", "INVALID_PAGE_TOKEN")
        for kind in (99, -1):  # never "every kind": refused before any node is asked
            code, reason, _ = await refusal(stubs[2].ListGames(pb.ListGamesRequest(
                kind=kind)))  # type: ignore[arg-type]
            assert (code, reason) == ("INVALID_ARGUMENT", "INVALID_GAME_KIND"), kind
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


async def test_a_backends_private_tables_are_listed_to_it_alone_from_any_node(
        postgres: Postgres, tmp_path: Path) -> None:
    database = await postgres.create_database()
    keys = door(tmp_path).keys
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        nodes = [await start_node(postgres.url(database), keys) for _ in range(2)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{n.port}") for n in nodes]
        first, second = (pb_grpc.GameServiceStub(c) for c in channels)
        made: dict[str, list[str]] = {"a": [], "b": []}
        for _ in range(4):
            for stub, key, name in ((first, KEY_A, "a"), (second, KEY_B, "b")):
                created = await stub.CreateGame(pb.CreateGameRequest(
                    kind=pb.GAME_KIND_WAR, seat_configs=[pb.SeatConfig(
                        type=pb.SEAT_TYPE_PERSON)] * 2), metadata=backend(key))
                made[name].append(created.game.game_id)  # private: a key's default
        public = await second.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, visibility=pb.VISIBILITY_PUBLIC), metadata=backend(KEY_B))

        async def walk(stub: pb_grpc.GameServiceStub, key: str | None) -> set[str]:
            seen: list[str] = []
            token = ""
            while True:
                answer = await stub.ListGames(pb.ListGamesRequest(
                    page_size=2, page_token=token), metadata=backend(key) if key else None)
                seen.extend(g.game_id for g in answer.games)
                token = answer.next_page_token
                if not token:
                    assert len(seen) == len(set(seen))
                    return set(seen)

        for stub in (first, second):
            assert await walk(stub, KEY_A) == {*made["a"], public.game.game_id}
            assert await walk(stub, KEY_B) == {*made["b"], public.game.game_id}
            assert await walk(stub, None) == {public.game.game_id}
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


async def test_a_cluster_lists_a_finished_series_as_get_game_says(
        postgres: Postgres, tmp_path: Path) -> None:
    """SERIES_OVER and the labels, through the node that holds the table and through another
    (a relayed GetGame, a merged ListGames); a spectator token rotated through the other."""
    database = await postgres.create_database()
    keys = door(tmp_path).keys
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        nodes = [await start_node(postgres.url(database), keys) for _ in range(2)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{n.port}") for n in nodes]
        stubs = [pb_grpc.GameServiceStub(c) for c in channels]
        created = await stubs[0].CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, series_length=1, labels={"match": "m-1"},
            war=war_pb2.WarOptions(target_points=1), seat_configs=[
                pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=f"u-{seat}")
                for seat in (0, 1)]), metadata=backend(KEY_A))
        game_id = created.game.game_id
        tokens = [t.seat_token for t in created.seat_tokens]
        await play_war(stubs[1], game_id, tokens, metadata=auth(tokens[0]))
        for stub in stubs:
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=backend(KEY_A))).game
            listed = {g.game_id: g for g in (await stub.ListGames(pb.ListGamesRequest(
                include_finished=True), metadata=backend(KEY_A))).games}
            assert view.status == listed[game_id].status == pb.GAME_STATUS_SERIES_OVER
            assert dict(view.labels) == dict(listed[game_id].labels) == {"match": "m-1"}
        old = (await stubs[1].CreateSpectatorToken(pb.CreateSpectatorTokenRequest(
            game_id=game_id), metadata=backend(KEY_A))).spectator_token
        new = (await stubs[1].RotateSpectatorToken(pb.RotateSpectatorTokenRequest(
            game_id=game_id, request_id="r"), metadata=backend(KEY_A))).spectator_token
        for stub in stubs:  # relayed to the owner from the other node
            code, reason, _ = await refusal(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                                         metadata=auth(old)))
            assert (code, reason) == ("UNAUTHENTICATED", "TOKEN_REVOKED")
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=auth(new))).game
            assert not view.HasField("your_seat") and not view.labels
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)
