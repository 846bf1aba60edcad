"""A backend integrating Tapis, end to end, on the generated stubs alone (package tapis.v1).

    python clients/examples/backend_integration.py HOST:PORT --ca ca.pem --api-key-file key

1. The backend creates a private table of War for two of its players, with their seats
   reserved (``SeatConfig.player_id``): their tokens ("tickets") come back at once.
2. Each player connects over TLS with its ticket only and plays to the end (here: the first
   legal action, whenever its seat is awaited).
3. The backend follows its results (``WatchResults``), stores them (here: prints them), and
   acknowledges them (``AckResults``) so the server may forget them.
4. Before the game, one player is replaced (``ReplaceSeat``): the former ticket stops working
   at once, the new player gets a ticket of its own and takes the seat back from the bot that
   plays it meanwhile (``ReclaimSeat``, the first legal action its view offers).

docs/integration.md walks through it. The test suite runs it against a server with TLS and
keys (tests/trust/test_integration_example.py).
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc


def tls_channel(target: str, ca: bytes) -> grpc.aio.Channel:
    """A channel to the server over TLS, trusting the server's CA."""
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=ca))


async def create_table(backend: pb_grpc.GameServiceStub, key: str,
                       players: list[str]) -> pb.CreateGameResponse:
    """Step 1: a private table of two reserved seats; one series of one game, labelled with
    the backend's own match id (it comes back in every result record)."""
    return await backend.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=len(players), series_length=1,
        labels={"match": f"match-{'-'.join(players)}"},
        visibility=pb.VISIBILITY_PRIVATE, request_id=str(uuid.uuid4()),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=player,
                                    display_name=player.title()) for player in players]),
        metadata=(("x-api-key", key),))


async def play(target: str, ca: bytes, game_id: str, ticket: str) -> int:
    """Step 2: a player with its ticket plays the first legal action when awaited; the number
    of its moves once the table's series is over."""
    auth = (("authorization", f"Bearer {ticket}"),)
    async with tls_channel(target, ca) as channel:
        stub = pb_grpc.GameServiceStub(channel)
        moves = 0
        while True:
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth)).game
            if view.status in (pb.GAME_STATUS_SERIES_OVER, pb.GAME_STATUS_GAME_OVER,
                               pb.GAME_STATUS_ABANDONED):
                return moves
            if view.legal_actions:
                try:
                    await stub.SubmitAction(pb.SubmitActionRequest(
                        game_id=game_id, action=view.legal_actions[0],
                        request_id=str(uuid.uuid4()), expected_version=view.version),
                        metadata=auth)
                    moves += 1
                except grpc.aio.AioRpcError as error:  # the table moved first: look again
                    if error.code() != grpc.StatusCode.ABORTED:
                        raise
                continue
            stream = stub.StreamEvents(pb.StreamEventsRequest(
                game_id=game_id, after_sequence=view.last_sequence), metadata=auth)
            await stream.read()  # wait until the table moves
            stream.cancel()


async def replace_player(backend: pb_grpc.GameServiceStub, key: str, game_id: str,
                         seat: int, player: str) -> str:
    """Step 4: give ``seat`` to ``player``; its new ticket. The former ticket's calls and
    streams end UNAUTHENTICATED / TOKEN_REVOKED from now on; a retry with the same request_id
    would answer the same ticket."""
    replaced = await backend.ReplaceSeat(pb.ReplaceSeatRequest(
        game_id=game_id, seat=seat, player_id=player, display_name=player.title(),
        request_id=str(uuid.uuid4())), metadata=(("x-api-key", key),))
    return replaced.seat_token.seat_token


async def follow_results(backend: pb_grpc.GameServiceStub, key: str, after: int,
                         wanted: int) -> list[pb.ResultRecord]:
    """Step 3: the results after cursor ``after`` until ``wanted`` have come, each stored
    (here: kept in a list) before it is acknowledged."""
    stored: list[pb.ResultRecord] = []
    if after:  # at start: what was stored before a crash is acknowledged first
        await backend.AckResults(pb.AckResultsRequest(cursor=after),
                                 metadata=(("x-api-key", key),))
    stream = backend.WatchResults(pb.WatchResultsRequest(after_cursor=after),
                                  metadata=(("x-api-key", key),))
    async for response in stream:
        stored.extend(response.records)  # a real backend writes them to its database here
        await backend.AckResults(pb.AckResultsRequest(cursor=stored[-1].cursor),
                                 metadata=(("x-api-key", key),))
        if len(stored) >= wanted:
            break
    stream.cancel()
    return stored


async def run(target: str, ca: bytes, key: str) -> list[pb.ResultRecord]:
    """The whole walk: the results the backend stored (a game end, then the series end)."""
    async with tls_channel(target, ca) as channel:
        backend = pb_grpc.GameServiceStub(channel)
        created = await create_table(backend, key, ["ada", "grace"])
        game_id = created.game.game_id
        tickets = {t.player_id: t.seat_token for t in created.seat_tokens}
        print(f"table {game_id}: tickets for {', '.join(sorted(tickets))}")
        seat = next(t.seat for t in created.seat_tokens if t.player_id == "grace")
        former = tickets.pop("grace")
        tickets["linus"] = await replace_player(backend, key, game_id, seat, "linus")
        try:
            await backend.GetGame(pb.GetGameRequest(game_id=game_id),
                                  metadata=(("authorization", f"Bearer {former}"),))
        except grpc.aio.AioRpcError as error:
            print(f"seat {seat} given to linus; grace's ticket: {error.code().name}")
        moves = await asyncio.gather(*(play(target, ca, game_id, ticket)
                                       for ticket in tickets.values()))
        print(f"played: {sum(moves)} moves")
        results = await follow_results(backend, key, after=0, wanted=2)
        for record in results:
            what = record.WhichOneof("result")
            if what == "game_ended":
                winners = [record.player_ids[s] for s in record.game_ended.summary.winners]
                print(f"#{record.cursor} {record.labels['match']} game "
                      f"{record.game_ended.game_number}: won by {', '.join(winners) or 'nobody'}")
            else:
                print(f"#{record.cursor} {record.labels['match']} series ended "
                      f"({pb.SeriesEndReason.Name(record.series_ended.reason)})")
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target", help="the server, HOST:PORT")
    parser.add_argument("--ca", type=Path, required=True, help="the server's CA (PEM)")
    parser.add_argument("--api-key-file", type=Path, required=True,
                        help="a file holding the backend's API key")
    args = parser.parse_args()
    asyncio.run(run(args.target, args.ca.read_bytes(),
                    args.api_key_file.read_text(encoding="utf-8").strip()))


if __name__ == "__main__":
    main()
