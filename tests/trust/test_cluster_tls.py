"""Cluster nodes reach each other over TLS: a call relayed from one node to the table's owner
works with mutual TLS (a client whose certificate another CA signed is refused), and a node
that could not check its peers' certificates refuses to start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door.security import CannotSecure
from tapis_service.door.tls import channel_credentials
from tapis_service.process.server import RunningServer, create_server
from tests.support.certificates import issue
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of
from tests.trust.door import KEY_A, OWN_CONNECTION, backend, door, war_request


async def start_node(url: str, **security: object) -> RunningServer:
    port = free_port()
    return await create_server(replace(
        TEST_SETTINGS, port=port, store="postgres", database_url=url,
        advertise=f"localhost:{port}", node_ttl_s=3.0, **security))  # type: ignore[arg-type]


async def test_a_call_relayed_between_nodes_goes_over_mutual_tls(
        tmp_path: Path, postgres: Postgres) -> None:
    files = door(tmp_path)
    database = await postgres.create_database()
    nodes: list[RunningServer] = []
    try:
        security = dict(tls_cert=files.server.cert, tls_key=files.server.key,
                        tls_client_ca=files.server.ca, api_keys_file=files.keys)
        nodes = [await start_node(postgres.url(database), **security) for _ in range(2)]
        client = issue(tmp_path, "client")  # players present a certificate too (mutual TLS)
        credentials = channel_credentials(files.server.ca_bytes(), files.server.cert_bytes(),
                                          files.server.key_bytes())
        channels = [grpc.aio.secure_channel(f"localhost:{n.port}", credentials,
                                            options=OWN_CONNECTION) for n in nodes]
        first, second = (pb_grpc.GameServiceStub(c) for c in channels)
        created = await first.CreateGame(war_request(), metadata=backend(KEY_A))
        game_id = created.game.game_id
        assert game_id in live_of(nodes[0].host) and game_id not in live_of(nodes[1].host)
        # a private table: its backend's key goes with the call relayed to the owner
        with pytest.raises(grpc.aio.AioRpcError) as stranger_join:
            await second.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))
        assert stranger_join.value.code() == grpc.StatusCode.PERMISSION_DENIED
        joined = await second.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0),
                                       metadata=backend(KEY_A))
        assert joined.seat == 0 and joined.seat_token
        view = await second.GetGame(pb.GetGameRequest(game_id=game_id), metadata=backend(KEY_A))
        assert view.game.seats[0].taken
        stranger = grpc.aio.secure_channel(
            f"localhost:{nodes[1].port}", channel_credentials(files.server.ca_bytes(),
                                                              client.cert_bytes(),
                                                              client.key_bytes()),
            options=OWN_CONNECTION)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await pb_grpc.GameServiceStub(stranger).GetGame(
                pb.GetGameRequest(game_id=game_id), timeout=10)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        for channel in [*channels, stranger]:
            await channel.close()
    finally:
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


async def test_a_node_that_cannot_check_its_peers_refuses_to_start_before_its_store(
        tmp_path: Path, postgres: Postgres) -> None:
    files = door(tmp_path)
    with pytest.raises(CannotSecure, match="--cluster-tls-ca"):
        await start_node(postgres.url("nowhere"), tls_cert=files.server.cert,
                         tls_key=files.server.key)
