"""The table of RPCs (``tapis_service.door.rpcs``) and the contract agree, and its tunnel codes are
fixed: a code once given keeps its method forever."""

from __future__ import annotations

import ast
from pathlib import Path

import tapis_service
from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import rpcs
from tapis_service.game_api import GameApi

SERVICE = pb.DESCRIPTOR.services_by_name["GameService"]

GIVEN_CODES = {"CreateGame": 1, "JoinGame": 2, "GetGame": 3, "SubmitAction": 4,
               "StreamEvents": 5, "ListGames": 6, "CreateSpectatorToken": 7,
               "WatchResults": 8, "AckResults": 9, "EndTable": 10, "ReplaceSeat": 11}
"""Codes given so far: a method added later gets a new code; none of these ever changes."""


def test_the_table_declares_every_method_of_the_contract_with_its_messages() -> None:
    assert sorted(rpc.name for rpc in rpcs.RPCS) == sorted(m.name for m in SERVICE.methods)
    for method in SERVICE.methods:
        rpc = rpcs.BY_NAME[method.name]
        assert rpc.request.DESCRIPTOR is method.input_type, method.name
        assert rpc.response.DESCRIPTOR is method.output_type, method.name
        assert rpc.streams == method.server_streaming, method.name
        assert not method.client_streaming
        assert rpc.path == f"/{SERVICE.full_name}/{method.name}"


def _parameters() -> dict[str, list[str]]:
    """Each GameApi method's parameters, read from its source (compiled by mypyc, a decorated
    method keeps no signature ``inspect`` can read)."""
    tree = ast.parse(Path(tapis_service.__file__).with_name("game_api.py").read_text())
    api = next(node for node in tree.body
               if isinstance(node, ast.ClassDef) and node.name == GameApi.__name__)
    return {node.name: [argument.arg for argument in node.args.args] for node in api.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_row_names_a_game_api_method_of_its_kind() -> None:
    parameters = _parameters()
    for rpc in rpcs.RPCS:
        assert callable(getattr(GameApi, rpc.api)), rpc.name
        assert ("end" in parameters[rpc.api]) == rpc.streams, rpc.name  # a stream's ender
        assert parameters[rpc.api][:3] == ["self", "request", "caller"], rpc.name


def test_tunnel_codes_are_unique_within_range_and_never_change() -> None:
    codes = [rpc.code for rpc in rpcs.RPCS]
    assert len(set(codes)) == len(codes)
    assert all(1 <= code <= rpcs.MAX_CODE for code in codes)
    for name, code in GIVEN_CODES.items():
        if name in rpcs.BY_NAME:
            assert rpcs.BY_NAME[name].code == code, name
    retired = set(GIVEN_CODES.values()) - {rpcs.BY_NAME[n].code for n in GIVEN_CODES
                                            if n in rpcs.BY_NAME}
    assert not retired & set(codes), "a retired code is never given again"


def test_routing_says_what_a_cluster_does_with_each_method() -> None:
    for rpc in rpcs.RPCS:
        if rpc.routing is rpcs.Routing.TABLE:  # routed by field 1, the table id
            assert rpc.request.DESCRIPTOR.fields_by_number[1].name == "game_id", rpc.name
        if rpc.writes:
            assert not rpc.streams and rpc.routing in (rpcs.Routing.TABLE, rpcs.Routing.PLACE)


def test_the_websocket_envelope_carries_rpcs_of_the_table_answered_by_their_responses() -> None:
    from tapis.v1 import websocket_pb2 as ws_pb
    from tapis_service.ws import frames

    requests = ws_pb.ClientFrame.DESCRIPTOR.oneofs_by_name["request"].fields
    assert set(frames.RPC_OF_FIELD) == {f.name for f in requests} - {frames.STOP}
    responses = ws_pb.ServerFrame.DESCRIPTOR.fields_by_name
    for field, rpc in frames.RPC_OF_FIELD.items():
        assert responses[frames.RESPONSE_FIELD[field]].message_type is rpc.response.DESCRIPTOR
