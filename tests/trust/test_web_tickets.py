"""The web client on a server with API keys: the page learns from a public flag that players
cannot create tables there (never anything secret), a player without a key is refused a table
over the WebSocket, and a seat token a backend handed out (the player's ticket) plays."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tests.support.websocket import Client, reason
from tests.trust.door import KEY_A, REVEAL, StartSecured, backend, door, war_request


async def get(port: int, path: str) -> tuple[bytes, bytes]:
    """The head and body of a plain ``GET path`` on the WebSocket port."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


async def test_the_page_is_told_whether_creating_a_table_needs_a_key(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    keyed = await start_secured(files, tls=False, keys=True, ws_port=0)
    opened = await start_secured(files, tls=False, keys=False, ws_port=0)
    for secured, expected in ((keyed, True), (opened, False)):
        assert secured.running.ws_port is not None
        head, body = await get(secured.running.ws_port, "/capabilities.json")
        assert head.startswith(b"HTTP/1.1 200") and b"application/json" in head
        assert json.loads(body) == {"api_keys": expected}
        assert KEY_A.encode() not in body and b"backend-a" not in body


async def test_with_keys_a_player_plays_the_ticket_a_backend_handed_out(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), tls=False, keys=True, ws_port=0)
    client = await Client.open(f"ws://127.0.0.1:{secured.running.ws_port}/ws")
    try:
        refused = await client.call(create_game=war_request())
        assert reason(refused) == "API_KEY_REQUIRED"
        created = await secured.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seats=2, seed=5, war=war_pb2.WarOptions(target_points=1),
            seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=player)
                          for player in ("u-17", "u-42")]), metadata=backend(KEY_A))
        game_id = created.game.game_id
        tickets = {t.seat: t.seat_token for t in created.seat_tokens}
        seen = await client.call(seat_token=tickets[1],
                                 get_game=pb.GetGameRequest(game_id=game_id))
        view = seen.get_game.game
        assert view.your_seat == 1
        played = await client.call(
            seat_token=tickets[view.awaiting_seats[0]],
            submit_action=pb.SubmitActionRequest(game_id=game_id, action=REVEAL))
        assert played.WhichOneof("response") == "submit_action"
    finally:
        client.close()
