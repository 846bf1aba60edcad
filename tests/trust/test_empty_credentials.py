"""An empty credential is no credential, on both doors: gRPC's ``x-api-key: ""`` and
``authorization: ""`` are answered as the same call without them, as the WebSocket answers a
frame whose ``api_key`` or ``seat_token`` is empty (proto3: empty and absent are one), on a
server with API keys and on one without. A credential that is not empty and not the server's
(white space only, a key padded with spaces) stays refused, the same on both doors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tests.support.websocket import Client, reason
from tests.trust.door import KEY_A, StartSecured, backend, door, refusal, war_request

Outcome = str | tuple[str, str]
"""``"OK"``, or a refusal's status code name and ErrorInfo reason."""
CALLS = (("CreateGame", "create_game"), ("ListGames", "list_games"), ("GetGame", "get_game"))


async def over_grpc(stub: Any, method: str, request: Any,
                    metadata: Sequence[tuple[str, str]]) -> Outcome:
    try:
        await getattr(stub, method)(request, metadata=tuple(metadata) or None)
    except grpc.aio.AioRpcError as error:
        code, why = refusal(error)
        return code.name, why
    return "OK"


async def over_websocket(client: Client, field: str, request: Any, *, api_key: str = "",
                         seat_token: str = "") -> Outcome:
    answer = await client.call(seat_token=seat_token, api_key=api_key, **{field: request})
    if answer.WhichOneof("response") == "refusal":
        code = next(c for c in grpc.StatusCode if c.value[0] == answer.refusal.code)
        return code.name, reason(answer)
    return "OK"


@pytest.mark.parametrize("keys", [True, False], ids=["with-keys", "open-mode"])
async def test_an_empty_api_key_is_no_key_on_both_doors(
        tmp_path: Path, start_secured: StartSecured, keys: bool) -> None:
    secured = await start_secured(door(tmp_path), tls=False, keys=keys, ws_port=0)
    # with keys, a backend's table is private: what a keyless caller may not read
    game_id = (await secured.stub.CreateGame(
        war_request(), metadata=backend(KEY_A) if keys else None)).game.game_id
    requests = {"CreateGame": war_request(), "ListGames": pb.ListGamesRequest(),
                "GetGame": pb.GetGameRequest(game_id=game_id)}
    expected: dict[str, Outcome] = (
        {"CreateGame": ("UNAUTHENTICATED", "API_KEY_REQUIRED"), "ListGames": "OK",
         "GetGame": ("PERMISSION_DENIED", "PRIVATE_TABLE")} if keys
        else {"CreateGame": "OK", "ListGames": "OK", "GetGame": "OK"})
    client = await Client.open(f"ws://127.0.0.1:{secured.running.ws_port}/ws")
    try:
        for method, field in CALLS:
            request = requests[method]
            seen = {
                "grpc, no key": await over_grpc(secured.stub, method, request, ()),
                "grpc, empty key": await over_grpc(secured.stub, method, request,
                                                   backend("")),
                "websocket, empty key": await over_websocket(client, field, request),
            }
            assert seen == dict.fromkeys(seen, expected[method]), method
            for blank in (" ", "   ", f" {KEY_A} "):  # not empty: a key, and not the server's
                refused = ("UNAUTHENTICATED", "INVALID_API_KEY")
                assert await over_grpc(secured.stub, method, request, backend(blank)) == refused
                assert await over_websocket(client, field, request, api_key=blank) == refused
    finally:
        client.close()


async def test_an_empty_x_api_key_beside_a_key_is_not_the_one_used(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """An empty value is no value: the call acts with the key sent beside it, whichever comes
    first (of two keys not empty, the first is the one: ``tests/service/test_caller.py``)."""
    secured = await start_secured(door(tmp_path), tls=False, keys=True)
    for metadata in ((("x-api-key", ""), ("x-api-key", KEY_A)),
                     (("x-api-key", KEY_A), ("x-api-key", ""))):
        assert await over_grpc(secured.stub, "CreateGame", war_request(), metadata) == "OK"
    assert await over_grpc(secured.stub, "CreateGame", war_request(),
                           (("x-api-key", ""), ("x-api-key", ""))) == \
        ("UNAUTHENTICATED", "API_KEY_REQUIRED")


@pytest.mark.parametrize("keys", [True, False], ids=["with-keys", "open-mode"])
async def test_an_empty_seat_token_is_no_token_on_both_doors(
        tmp_path: Path, start_secured: StartSecured, keys: bool) -> None:
    """gRPC's ``authorization: ""`` reads a public table as a spectator, as a WebSocket frame
    with an empty ``seat_token`` does; a header that is not ``Bearer <token>`` (``Bearer``
    alone, another scheme) and a token of white space only stay ``INVALID_TOKEN``."""
    secured = await start_secured(door(tmp_path), tls=False, keys=keys, ws_port=0)
    game_id = (await secured.stub.CreateGame(
        war_request(visibility=pb.VISIBILITY_PUBLIC) if keys else war_request(),
        metadata=backend(KEY_A) if keys else None)).game.game_id
    request = pb.GetGameRequest(game_id=game_id)
    client = await Client.open(f"ws://127.0.0.1:{secured.running.ws_port}/ws")
    try:
        assert await over_grpc(secured.stub, "GetGame", request, ()) == "OK"
        assert await over_grpc(secured.stub, "GetGame", request,
                               (("authorization", ""),)) == "OK"
        assert await over_websocket(client, "get_game", request) == "OK"
        invalid = ("UNAUTHENTICATED", "INVALID_TOKEN")
        for header in ("Bearer", "Bearer ", "Bearer   ", "Basic abc"):
            assert await over_grpc(secured.stub, "GetGame", request,
                                   (("authorization", header),)) == invalid, header
        for token in (" ", "   "):
            assert await over_websocket(client, "get_game", request, seat_token=token) == \
                invalid
    finally:
        client.close()


async def test_an_empty_api_key_spends_no_wrong_key_budget_on_either_door(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """Wrong keys count against the address's ``--bad-token-rate``; empty ones, no key, do
    not: listing with one goes on where wrong keys are soon ``RATE_LIMITED``."""
    secured = await start_secured(door(tmp_path), tls=False, keys=True, ws_port=0,
                                  bad_token_rate_per_s=0.001, bad_token_burst=2)
    request = pb.ListGamesRequest()
    client = await Client.open(f"ws://127.0.0.1:{secured.running.ws_port}/ws")
    try:
        for _ in range(4):
            assert await over_grpc(secured.stub, "ListGames", request, backend("")) == "OK"
            assert await over_websocket(client, "list_games", request) == "OK"
        wrong = [await over_grpc(secured.stub, "ListGames", request, backend("not-a-key"))
                 for _ in range(3)]
        assert wrong[-1] == ("RESOURCE_EXHAUSTED", "RATE_LIMITED"), wrong
    finally:
        client.close()
