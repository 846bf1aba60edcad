"""A complete Tapis bot in ~30 lines, on the generated stubs alone (package tapis.v1).

    python clients/examples/first_legal_bot.py HOST:PORT GAME_ID

It takes a free seat, follows the table's event stream, and whenever the game waits for its
seat plays the first legal action the server lists. Stops when the game ends.
"""

import asyncio
import sys
import uuid

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc


async def play(target: str, game_id: str) -> int:
    """Play one seat to the end of the game; the number of moves made."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.GameServiceStub(channel)
        joined = await stub.JoinGame(pb.JoinGameRequest(
            game_id=game_id, display_name="first-legal", request_id=uuid.uuid4().hex))
        auth = (("authorization", f"Bearer {joined.seat_token}"),)
        moves, view = 0, joined.game
        stream = stub.StreamEvents(pb.StreamEventsRequest(
            game_id=game_id, after_sequence=view.last_sequence), metadata=auth)
        while True:
            if view.legal_actions and view.status == pb.GAME_STATUS_IN_PROGRESS:
                try:
                    await stub.SubmitAction(pb.SubmitActionRequest(
                        game_id=game_id, action=view.legal_actions[0],
                        request_id=uuid.uuid4().hex, expected_version=view.version),
                        metadata=auth)
                    moves += 1
                except grpc.aio.AioRpcError as error:  # the table moved first: look again
                    if error.code() != grpc.StatusCode.ABORTED:
                        raise
            view = pb.GameView()
            response = await stream.read()  # wait for the table to move
            if any(e.WhichOneof("body") == "game_ended" for e in response.events):
                return moves
            if joined.seat in response.events[-1].awaiting_seats:
                view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                           metadata=auth)).game


if __name__ == "__main__":
    print(asyncio.run(play(sys.argv[1], sys.argv[2])), "moves")
