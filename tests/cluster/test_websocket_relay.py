"""Any node answers any call over either transport: a cluster node's WebSocket reaches a table
another node owns as its gRPC port does (the same routes: the relay, the tunnel), and the calls
count in the RPC metrics under their transport."""

from __future__ import annotations

from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis.v1 import websocket_pb2 as ws_pb
from tests.cluster.harness import Node
from tests.cluster.play import Stats, new_table
from tests.support.calls import auth, events_until
from tests.support.process import free_port
from tests.support.websocket import Client, reason

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
ACTIONS = 4


async def socket_events(client: Client, stream_id: int, version: int) -> list[bytes]:
    """The events of the socket's stream ``stream_id``, serialized, until one reaches
    ``version``."""
    seen: list[bytes] = []
    while True:
        frame = await client.receive()
        if frame.id != stream_id:
            continue
        assert frame.WhichOneof("response") == "events", frame
        seen.extend(event.SerializeToString() for event in frame.events.events)
        if frame.events.events[-1].version >= version:
            return seen


async def test_a_nodes_websocket_serves_a_table_another_node_owns(cluster_url: str,
                                                                  tmp_path: Path) -> None:
    ws_port = free_port()
    owner = Node(cluster_url, tmp_path)
    other = Node(cluster_url, tmp_path, extra=("--ws-port", str(ws_port)))
    try:
        for node in (owner, other):
            await node.start()
        async with grpc.aio.insecure_channel(owner.address) as to_owner:
            stub = pb_grpc.GameServiceStub(to_owner)
            table = await new_table(stub, Stats(), "war", seed=11)
            client = await Client.open(f"ws://127.0.0.1:{ws_port}/ws")
            # GetGame: a spectator's view and a seat's, as gRPC gives them
            for token in ("", table.tokens[0]):
                over_socket = await client.call(seat_token=token, get_game=pb.GetGameRequest(
                    game_id=table.game_id))
                over_grpc = await stub.GetGame(pb.GetGameRequest(game_id=table.game_id),
                                               metadata=auth(token) if token else None)
                assert over_socket.get_game == over_grpc
            stream_id = client.send(ws_pb.ClientFrame(
                seat_token=table.tokens[0],
                stream_events=pb.StreamEventsRequest(game_id=table.game_id)))
            # SubmitAction: applied at the owner
            version = 0
            for number in range(ACTIONS):
                view = (await client.call(get_game=pb.GetGameRequest(
                    game_id=table.game_id))).get_game.game
                seat = view.awaiting_seats[0]
                answer = await client.call(
                    seat_token=table.tokens[seat], submit_action=pb.SubmitActionRequest(
                        game_id=table.game_id, request_id=f"ws{number}", action=REVEAL,
                        expected_version=view.version))
                version = answer.submit_action.version
                assert version == view.version + 1
                at_owner = await stub.GetGame(pb.GetGameRequest(game_id=table.game_id))
                assert at_owner.game.version == version
            # StreamEvents: the owner's events, byte for byte as over gRPC
            relayed = await socket_events(client, stream_id, version)
            direct = await events_until(stub, table.game_id, table.tokens[0], version)
            assert relayed == direct and len(relayed) >= ACTIONS
            # a refusal as the owner gives it
            refused = await client.call(seat_token="not-a-token", get_game=pb.GetGameRequest(
                game_id=table.game_id))
            assert reason(refused) == "INVALID_TOKEN"
            client.close()
        assert other.metric("tapis_cluster_forwards_total", method="SubmitAction") == ACTIONS
        assert other.metric("grpc_server_handled_total", grpc_method="SubmitAction",
                            grpc_code="OK", transport="websocket") == ACTIONS
        assert owner.metric("grpc_server_handled_total", grpc_method="SubmitAction",
                            grpc_code="OK", transport="relay") == ACTIONS
        assert owner.metric("grpc_server_started_total", grpc_method="StreamEvents",
                            transport="relay") >= 1
    finally:
        for node in (owner, other):
            node.stop()
