"""A real server process, stopped cleanly or killed with SIGKILL in the middle of games of every
kind, then restarted on the same data directory: nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_clients.connection import Connection
from tapis_engine.registry import GAMES
from tests.support.calls import auth, reason_of
from tests.support.driver import Game, all_events, play, start_game
from tests.support.process import ServerProcess, channel

pytestmark = pytest.mark.slow  # server processes started, killed, restarted

ACTIONS_BEFORE = 12
ACKS_UNDER_LOAD = 30
STREAM_WAIT_S = 20.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path, "--snapshot-every", "5")
    yield process
    process.stop()


async def snapshot_of(stub: pb_grpc.GameServiceStub, game: Game) -> tuple[int, list[bytes]]:
    """The version and the spectator's whole event log (serialised) of a game."""
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))).game
    events = await all_events(stub, game.game_id, 0, view.last_sequence)
    assert [e.sequence for e in events] == list(range(1, view.last_sequence + 1))
    return view.version, [e.SerializeToString() for e in events]


async def follow(conn: Connection, game_id: str, into: list[pb.Event]) -> None:
    async for event in conn.events(game_id, 0):
        into.append(event)


async def keep_playing(stub: pb_grpc.GameServiceStub, game: Game, seed: int) -> None:
    """Play until the server goes away (the error is expected) or the game ends."""
    try:
        await play(stub, game, random.Random(seed), 10_000)
    except grpc.aio.AioRpcError as error:
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_every_acknowledged_action_survives_a_restart(server: ServerProcess,
                                                            how: str) -> None:
    await server.start()
    grpc_channel = channel(server.target)
    stub = pb_grpc.GameServiceStub(grpc_channel)
    rng = random.Random(6)
    games = [await start_game(stub, kind, seed=100 + i) for i, kind in enumerate(sorted(GAMES))]
    for game in games:
        await play(stub, game, rng, ACTIONS_BEFORE)
    finished = await start_game(stub, "war", seed=11, war=war_pb2.WarOptions(target_points=3))
    while not await play(stub, finished, rng, 100):
        pass
    quiet = {g.game_id: await snapshot_of(stub, g) for g in [*games, finished]}

    # A client follows a game through the restart; the others keep playing until the stop.
    conn = Connection(server.target, retry_for_s=STREAM_WAIT_S)
    followed: list[pb.Event] = []
    follower = asyncio.ensure_future(follow(conn, games[0].game_id, followed))
    acked = sum(len(g.acks) for g in games)
    players = [asyncio.ensure_future(keep_playing(stub, g, 7 + i)) for i, g in enumerate(games)]
    while sum(len(g.acks) for g in games) < acked + ACKS_UNDER_LOAD:
        await asyncio.sleep(0.005)
    if how == "sigkill":
        server.kill()
    else:
        assert server.terminate() == 0
    await asyncio.gather(*players)
    await grpc_channel.close()

    await server.start()
    grpc_channel = channel(server.target)
    stub = pb_grpc.GameServiceStub(grpc_channel)
    for game in [*games, finished]:
        version, events = await snapshot_of(stub, game)
        before_version, before_events = quiet[game.game_id]
        assert version >= before_version, game.kind
        assert events[:len(before_events)] == before_events, game.kind
        last_ack = max((a.version for a in game.acks), default=0)
        assert version >= last_ack, f"{game.kind}: acknowledged version {last_ack} lost"
        for ack in game.acks[-5:]:  # retried after the restart: the first answer, not again
            again = await stub.SubmitAction(ack.request, metadata=auth(game.tokens[ack.seat]))
            assert again.version == ack.version, game.kind
        assert (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))).game.version \
            == version
    # The finished game is still there, from sequence 0.
    assert quiet[finished.game_id] == await snapshot_of(stub, finished)

    # The follower resumed by sequence: no gap, no duplicate, through the restart.
    await play(stub, games[0], rng, 3)
    last = (await stub.GetGame(pb.GetGameRequest(game_id=games[0].game_id))).game.last_sequence
    async with asyncio.timeout(STREAM_WAIT_S):
        while not followed or followed[-1].sequence < last:
            await asyncio.sleep(0.01)
    assert [e.sequence for e in followed] == list(range(1, last + 1))
    follower.cancel()
    await conn.close()
    await grpc_channel.close()


def test_the_server_module_runs(tmp_path: Path) -> None:
    """The command the tests start is the installed server (guards a broken entry point)."""
    out = subprocess.run([sys.executable, "-m", "tapis_service.process.main", "--help"],
                         capture_output=True, timeout=30, check=True)
    assert b"--data-dir" in out.stdout


async def test_a_replaced_seat_survives_a_sigkill(tmp_path: Path) -> None:
    """ReplaceSeat answered OK is durable: after SIGKILL and a restart the former token is
    still revoked, the new one still acts for the seat, and a retry answers the same token."""
    keys = tmp_path / "api-keys"
    keys.write_text("backend-key-0123456789abcdef backend-a\n", encoding="utf-8")
    backend = (("x-api-key", "backend-key-0123456789abcdef"),)
    server = ServerProcess(tmp_path, "--api-keys-file", str(keys))
    await server.start()
    try:
        async with channel(server.target) as grpc_channel:
            stub = pb_grpc.GameServiceStub(grpc_channel)
            created = await stub.CreateGame(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, seats=2, seed=3, seat_configs=[
                    pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=f"u-{seat}")
                    for seat in (0, 1)]), metadata=backend)
            game_id, old = created.game.game_id, created.seat_tokens[1].seat_token
            request = pb.ReplaceSeatRequest(game_id=game_id, seat=1, player_id="u-9",
                                            display_name="Linus", request_id="replace-1")
            replaced = await stub.ReplaceSeat(request, metadata=backend)
        server.kill()
        await server.start()
        async with channel(server.target) as grpc_channel:
            stub = pb_grpc.GameServiceStub(grpc_channel)
            with pytest.raises(grpc.aio.AioRpcError) as revoked:
                await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(old))
            assert revoked.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert reason_of(revoked.value) == "TOKEN_REVOKED"
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=auth(replaced.seat_token.seat_token))).game
            assert view.your_seat == 1 and view.seats[1].display_name == "Linus"
            assert (await stub.ReplaceSeat(request, metadata=backend)) == replaced
    finally:
        server.stop()
